"""Tests of icl_gd.metrics.formulas against hand-computed values and slow loop implementations."""

from __future__ import annotations

import logging
import math

import numpy as np
import pytest

from icl_gd.metrics import formulas as M
from icl_gd.metrics import resampling

SQRT2 = math.sqrt(2.0)


# --------------------------------------------------------------------------------------------
# cosine, accuracy


def test_cosine_hand_values():
    assert M.cosine([1.0, 0.0], [1.0, 1.0]) == pytest.approx(1 / SQRT2, abs=1e-15)
    assert M.cosine([1.0, 2.0], [-2.0, -4.0]) == pytest.approx(-1.0, abs=1e-15)
    assert M.cosine([1.0, 0.0], [0.0, 3.0]) == pytest.approx(0.0, abs=1e-15)
    # axis: the columns of a are the vectors
    a = np.array([[1.0, 1.0], [0.0, 1.0]])
    b = np.array([[1.0, 0.0], [1.0, 1.0]])
    np.testing.assert_allclose(M.cosine(a, b, axis=0), [1 / SQRT2, 1 / SQRT2], atol=1e-15)
    np.testing.assert_allclose(M.cosine(a, b, axis=-1), [1 / SQRT2, 1 / SQRT2], atol=1e-15)
    np.testing.assert_allclose(M.cosine(a, b[0], axis=-1), [1 / SQRT2, 0.0], atol=1e-15)  # broadcast


def test_cosine_zero_norm_is_nan():
    out = M.cosine(np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0]]), np.array([[1.0, 0.0], [0.0, 0.0], [1.0, 1.0]]))
    assert np.isnan(out[0]) and np.isnan(out[1])
    assert out[2] == pytest.approx(1.0)


def test_cosine_float16_computed_in_float64():
    # squares of 300 and 400 overflow float16 (max 65504); float64 gives the exact answer
    a = np.array([300.0, 400.0], dtype=np.float16)
    b = np.array([400.0, 300.0], dtype=np.float16)
    assert M.cosine(a, b) == pytest.approx(24 / 25, abs=1e-15)


def test_accuracy():
    assert M.accuracy([0, 1, 1, 2], [0, 1, 2, 2]) == 0.75
    assert M.accuracy(np.array([1, 1], dtype=np.int16), np.array([0, 0], dtype=np.int16)) == 0.0


# --------------------------------------------------------------------------------------------
# prediction metrics

# ZSL, ICL, FT, gold for the Rec2FTP hand case (binary labels)
#   0: ZSL wrong, ICL right, FT right  -> numerator and denominator
#   1: ZSL wrong, ICL wrong, FT right  -> denominator only
#   2: ZSL wrong, ICL right, FT right  -> numerator and denominator
#   3: ZSL right, ICL right, FT right  -> neither (ZSL right)
#   4: ZSL wrong, ICL right, FT wrong  -> neither (FT wrong)
#   5: ZSL right, ICL wrong, FT right  -> neither
REC_GOLD = np.array([1, 1, 0, 0, 1, 0])
REC_ZSL = np.array([0, 0, 1, 0, 0, 0])
REC_ICL = np.array([1, 0, 0, 0, 1, 1])
REC_FT = np.array([1, 1, 0, 0, 0, 0])


def test_rec2ftp_hand_case():
    # 2 of the 3 examples FT fixed were fixed by ICL too
    assert M.rec2ftp(REC_ZSL, REC_ICL, REC_FT, REC_GOLD) == pytest.approx(200 / 3)


def test_rec2ftp_empty_denominator_is_nan_with_warning(caplog):
    gold = np.array([0, 1, 1])
    with caplog.at_level(logging.WARNING, logger="icl_gd.metrics.formulas"):
        out = M.rec2ftp(gold, gold, gold, gold)  # ZSL always right: FT fixes nothing
    assert math.isnan(out)
    assert any("rec2ftp" in r.getMessage() for r in caplog.records)


# ZSL, ICL, FT, gold for the Jaccard hand case (three labels)
#   0: 0 -> 1 (ICL), 0 -> 1 (FT), gold 1: both, same label, correct
#   1: 0 -> 1 (ICL), 0 -> 2 (FT), gold 1: both changed but to *different* labels
#   2: 0 -> 2, 0 -> 2, gold 1: both, same label, incorrect
#   3: FT only, 0 -> 1, gold 1 (correct)
#   4: ICL only, 0 -> 2, gold 0 (incorrect)
#   5: no change
#   6: like 0
J_ZSL = np.array([0, 0, 0, 0, 0, 1, 0])
J_ICL = np.array([1, 1, 2, 0, 2, 1, 1])
J_FT = np.array([1, 2, 2, 1, 0, 1, 1])
J_GOLD = np.array([1, 1, 1, 1, 0, 1, 1])


def test_jaccard_all():
    # D_ICL = {0,1,2,4,6}, D_FT = {0,1,2,3,6}, intersection {0,2,6} (1 changed to different labels)
    assert M.jaccard(J_ZSL, J_ICL, J_FT, J_GOLD) == pytest.approx(3 / 7)
    assert M.jaccard(J_ZSL, J_ICL, J_FT, J_GOLD, subset="all") == pytest.approx(3 / 7)


def test_jaccard_correct_and_incorrect():
    # correct: D_ICL = {0,1,6}, D_FT = {0,3,6}, intersection {0,6} -> 2 / 4
    assert M.jaccard(J_ZSL, J_ICL, J_FT, J_GOLD, subset="correct") == pytest.approx(0.5)
    # incorrect: D_ICL = {2,4}, D_FT = {1,2}, intersection {2} -> 1 / 3
    assert M.jaccard(J_ZSL, J_ICL, J_FT, J_GOLD, subset="incorrect") == pytest.approx(1 / 3)


def test_jaccard_different_labels_not_in_intersection():
    # only example 1: both change it, to different labels -> intersection empty, union 2
    z, i, f, g = (np.array([x]) for x in (0, 1, 2, 1))
    assert M.jaccard(z, i, f, g) == 0.0


def test_jaccard_empty_union_is_nan_with_warning(caplog):
    p = np.array([0, 1, 0])
    with caplog.at_level(logging.WARNING, logger="icl_gd.metrics.formulas"):
        assert math.isnan(M.jaccard(p, p, p, np.array([0, 0, 0])))
        # changes exist, but none is correct
        assert math.isnan(M.jaccard(p, 1 - p, 1 - p, p, subset="correct"))
    assert sum("jaccard" in r.getMessage() for r in caplog.records) == 2
    with pytest.raises(ValueError):
        M.jaccard(p, p, p, p, subset="right")


def test_f2t_mask():
    mask = M.f2t_mask(REC_ZSL, REC_ICL, REC_FT, REC_GOLD)
    assert mask.dtype == bool
    np.testing.assert_array_equal(mask, [True, False, True, False, False, False])


# --------------------------------------------------------------------------------------------
# SimAOU


def _hand_h():
    """(n=2, L=2, D=2) outputs with hand-computed SimAOU and SimAOU_norm (see the test)."""
    z = np.array([[[1, 0], [1, 1]], [[1, 0], [0, 1]]], dtype=float)
    i = np.array([[[0, 2], [2, 2]], [[1, 1], [0, 3]]], dtype=float)
    f = np.array([[[0, -5], [1, -1]], [[1, -1], [2, 1]]], dtype=float)
    return z, i, f


def test_simaou_hand_values():
    z, i, f = _hand_h()
    # ex0 l0: cos([-1,2], [-1,-5]) = -9/sqrt(130); ex1 l0: cos([0,1], [0,-1]) = -1
    # ex0 l1: cos([1,1], [0,-2]) = -1/sqrt2;        ex1 l1: cos([0,2], [2,0]) = 0
    expected = [(-9 / math.sqrt(130) - 1) / 2, (-1 / SQRT2 + 0) / 2]
    np.testing.assert_allclose(M.simaou(z, i, f), expected, atol=1e-14)
    per_ex = M.simaou(z, i, f, per_example=True)
    np.testing.assert_allclose(per_ex, [[-9 / math.sqrt(130), -1 / SQRT2], [-1, 0]], atol=1e-14)


def test_simaou_norm_hand_values(caplog):
    z, i, f = _hand_h()
    # ex0 l0: î = [0,1], f̂ = [0,-1], ẑ = [1,0]: cos([-1,1], [-1,-1]) = 0
    # ex1 l0: î = [1,1]/√2, f̂ = [1,-1]/√2: cos = (1-√2)/(2-√2) = -1/√2
    # layer 1: î = ẑ in both examples, so the ICL update is zero: undefined -> all-NaN layer
    with caplog.at_level(logging.WARNING, logger="icl_gd.metrics.formulas"):
        out = M.simaou(z, i, f, normalize=True)
    assert out[0] == pytest.approx(-1 / (2 * SQRT2), abs=1e-14)
    assert np.isnan(out[1])
    assert any("2 of 4" in r.getMessage() for r in caplog.records)


def test_simaou_excludes_undefined_examples():
    z, i, f = _hand_h()
    i = i.copy()
    i[1, 0] = z[1, 0]  # ex1 l0: ICL update zero -> excluded, layer 0 mean is ex0 alone
    out = M.simaou(z, i, f)
    assert out[0] == pytest.approx(-9 / math.sqrt(130), abs=1e-14)


def _gram_schmidt_case(rng, d=8):
    """z, r, r' with r ⟂ z, r' ⟂ z, r ⟂ r', |r|² = |r'|² = 3|z|²."""
    z = rng.standard_normal(d)
    basis = [z / np.linalg.norm(z)]
    out = []
    for _ in range(2):
        v = rng.standard_normal(d)
        for e in basis:
            v = v - (v @ e) * e
        v /= np.linalg.norm(v)
        basis.append(v)
        out.append(v * math.sqrt(3) * np.linalg.norm(z))
    return z, out[0], out[1]


def test_simaou_sanity_identity_paper001():
    rng = np.random.default_rng(7)
    n, n_layers, d = 4, 3, 8
    z = np.empty((n, n_layers, d))
    i = np.empty_like(z)
    f = np.empty_like(z)
    for a in range(n):
        for l in range(n_layers):
            zz, r, r2 = _gram_schmidt_case(rng, d)
            assert abs(zz @ r) < 1e-12 and abs(zz @ r2) < 1e-12 and abs(r @ r2) < 1e-12
            z[a, l], i[a, l], f[a, l] = zz, zz + r, zz + r2
    per_ex_norm = M.simaou(z, i, f, normalize=True, per_example=True)
    per_ex = M.simaou(z, i, f, per_example=True)
    np.testing.assert_allclose(per_ex_norm, 0.25, atol=1e-9, rtol=0)
    np.testing.assert_allclose(per_ex, 0.0, atol=1e-9, rtol=0)
    np.testing.assert_allclose(M.simaou(z, i, f, normalize=True), 0.25, atol=1e-9, rtol=0)


def test_simaou_float16_and_chunking(monkeypatch):
    rng = np.random.default_rng(0)
    z, i, f = (rng.standard_normal((13, 3, 16)).astype(np.float16) for _ in range(3))
    z64, i64, f64 = (x.astype(np.float64) for x in (z, i, f))
    expected = np.mean(
        np.sum((i64 - z64) * (f64 - z64), -1) / np.linalg.norm(i64 - z64, axis=-1) / np.linalg.norm(f64 - z64, axis=-1),
        axis=0,
    )
    np.testing.assert_allclose(M.simaou(z, i, f), expected, rtol=1e-12)
    monkeypatch.setattr(M, "_CHUNK_ELEMENTS", 3 * 16 * 4)  # 4 examples per chunk, ragged tail
    np.testing.assert_allclose(M.simaou(z, i, f), expected, rtol=1e-12)


# --------------------------------------------------------------------------------------------
# random SimAOU


def _unit(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def test_simaou_random_matches_reference_form_and_is_deterministic(monkeypatch):
    rng = np.random.default_rng(1)
    z, i = rng.standard_normal((2, 7, 2, 10))
    r = np.random.default_rng(42).random((7, 2, 10))
    delta = _unit(i) - _unit(z)
    expected = np.mean(np.sum(delta * r, -1) / np.linalg.norm(delta, axis=-1) / np.linalg.norm(r, axis=-1), 0)
    out = M.simaou_random(z, i, np.random.default_rng(42))
    np.testing.assert_allclose(out, expected, rtol=1e-12)
    np.testing.assert_array_equal(out, M.simaou_random(z, i, np.random.default_rng(42)))
    assert not np.allclose(out, M.simaou_random(z, i, np.random.default_rng(43)))
    # chunked draws consume the generator in the same order as one (n, L, D) draw
    monkeypatch.setattr(M, "_CHUNK_ELEMENTS", 2 * 10 * 3)
    np.testing.assert_allclose(M.simaou_random(z, i, np.random.default_rng(42)), expected, rtol=1e-12)
    g = np.random.default_rng(5).standard_normal((7, 2, 10))
    expected_g = np.mean(np.sum(delta * g, -1) / np.linalg.norm(delta, axis=-1) / np.linalg.norm(g, axis=-1), 0)
    np.testing.assert_allclose(M.simaou_random(z, i, np.random.default_rng(5), kind="gaussian"), expected_g, rtol=1e-12)


def test_simaou_random_gaussian_null_near_zero_uniform_biased():
    rng = np.random.default_rng(3)
    n, n_layers, d = 200, 2, 4096
    z = rng.standard_normal((n, n_layers, d))
    i = z + 0.5 + 0.1 * rng.standard_normal((n, n_layers, d))  # an update with a positive mean
    gauss = M.simaou_random(z, i, np.random.default_rng(0), kind="gaussian")
    assert gauss.shape == (n_layers,)
    assert np.all(np.abs(gauss) < 0.01)  # sd of the mean ~ 1/sqrt(n d) ~ 0.001
    uniform = M.simaou_random(z, i, np.random.default_rng(0), kind="uniform")
    assert np.all(uniform > 0.1)  # the reference's uncentred r: a positive bias is expected
    with pytest.raises(ValueError):
        M.simaou_random(z, i, np.random.default_rng(0), kind="normal")


# --------------------------------------------------------------------------------------------
# SimAM, SimAM_delta, alpha


def _maps(rng, n=9, n_layers=3, n_heads=4, n_keys=7, k=3, dtype=np.float64):
    query_len = rng.integers(1, n_keys + 1, size=n)
    query_len[0] = n_keys  # one example without padding
    maps = []
    for _ in range(k):
        m = rng.standard_normal((n, n_layers, n_heads, n_keys))
        pad = np.arange(n_keys)[None, :] >= query_len[:, None]  # (n, Q)
        m[np.broadcast_to(pad[:, None, None, :], m.shape)] = np.nan  # same padding in every map
        maps.append(m.astype(dtype))
    return query_len, maps


def _loop_map_metric(pair, maps, query_len):
    """Slow reference: explicit loops, explicit slicing to the valid keys."""
    n, n_layers, n_heads, _ = maps[0].shape
    per_ex = np.full((n, n_layers), np.nan)
    for a in range(n):
        q = query_len[a]
        for l in range(n_layers):
            cosines = []
            for h in range(n_heads):
                x, y = pair(*(m[a, l, h, :q].astype(np.float64) for m in maps))
                nx, ny = math.sqrt(float(x @ x)), math.sqrt(float(y @ y))
                if nx > 0 and ny > 0:
                    cosines.append(float(x @ y) / (nx * ny))
            if cosines:
                per_ex[a, l] = sum(cosines) / len(cosines)
    out = []
    for l in range(n_layers):
        vals = [v for v in per_ex[:, l] if not math.isnan(v)]
        out.append(sum(vals) / len(vals) if vals else math.nan)
    return np.array(out), per_ex


def _delta_pair(z, i, f):
    return i - z, f - z


@pytest.mark.parametrize("dtype", [np.float64, np.float16])
def test_simam_against_loop(dtype, monkeypatch):
    rng = np.random.default_rng(11)
    query_len, (a, b) = _maps(rng, k=2, dtype=dtype)
    expected, expected_ex = _loop_map_metric(lambda x, y: (x, y), (a, b), query_len)
    a_before = a.copy()
    np.testing.assert_allclose(M.simam(a, b), expected, rtol=1e-12)
    np.testing.assert_allclose(M.simam(a, b, query_len=query_len), expected, rtol=1e-12)
    np.testing.assert_allclose(M.simam(a, b, per_example=True), expected_ex, rtol=1e-12)
    np.testing.assert_array_equal(a, a_before)  # inputs are not modified
    monkeypatch.setattr(M, "_CHUNK_ELEMENTS", 3 * 4 * 7 * 2)  # 2 examples per chunk
    np.testing.assert_allclose(M.simam(a, b), expected, rtol=1e-12)


def test_simam_hand_value_ignores_padding():
    # one example, one layer, two heads; valid keys: 2 of 3
    a = np.array([[[[1.0, 0.0, np.nan], [1.0, 2.0, np.nan]]]])
    b = np.array([[[[1.0, 1.0, np.nan], [2.0, 4.0, np.nan]]]])
    expected = (1 / SQRT2 + 1.0) / 2  # head mean
    np.testing.assert_allclose(M.simam(a, b), [expected], atol=1e-15)
    # with query_len, whatever lies past it is ignored (here: finite garbage)
    a2, b2 = np.nan_to_num(a, nan=5.0), np.nan_to_num(b, nan=-7.0)
    np.testing.assert_allclose(M.simam(a2, b2, query_len=np.array([2])), [expected], atol=1e-15)


def test_simam_mean_over_heads_then_examples():
    # ex0 has 2 heads with cosines 1 and 0, ex1 has one defined head (cos 1) and one undefined:
    # heads-then-examples gives (0.5 + 1) / 2 = 0.75 (pooling all heads would give 2/3)
    a = np.array([[[[1.0, 0.0], [1.0, 0.0]]], [[[1.0, 0.0], [0.0, 0.0]]]])
    b = np.array([[[[1.0, 0.0], [0.0, 1.0]]], [[[2.0, 0.0], [1.0, 0.0]]]])
    np.testing.assert_allclose(M.simam(a, b), [0.75], atol=1e-15)


def test_simam_delta_and_alpha_against_loop(monkeypatch):
    rng = np.random.default_rng(12)
    query_len, (z, i, f) = _maps(rng, k=3)
    expected, expected_ex = _loop_map_metric(_delta_pair, (z, i, f), query_len)
    np.testing.assert_allclose(M.simam_delta(z, i, f), expected, rtol=1e-12)
    np.testing.assert_allclose(M.simam_delta(z, i, f, query_len=query_len), expected, rtol=1e-12)
    np.testing.assert_allclose(M.simam_delta(z, i, f, per_example=True), expected_ex, rtol=1e-12)
    np.testing.assert_allclose(M.alpha(z, i, f), expected, rtol=1e-12)
    # SimAM_delta is not SimAM of the raw maps
    assert not np.allclose(M.simam_delta(z, i, f), M.simam(i, f))
    monkeypatch.setattr(M, "_CHUNK_ELEMENTS", 1)  # one example per chunk
    np.testing.assert_allclose(M.alpha(z, i, f, query_len=query_len), expected, rtol=1e-12)


def test_alpha_hand_value():
    # keys [a, b, pad]: LCGD update [1, 0], GD update [1, 1] -> cos 1/sqrt2
    z = np.array([[[[0.5, -1.0, np.nan]]]])
    lcgd = z + np.array([1.0, 0.0, np.nan])
    gd = z + np.array([1.0, 1.0, np.nan])
    np.testing.assert_allclose(M.alpha(z, lcgd, gd), [1 / SQRT2], atol=1e-15)
    np.testing.assert_allclose(M.simam_delta(z, lcgd, gd), [1 / SQRT2], atol=1e-15)


def test_simam_warns_on_mismatched_padding(caplog):
    a = np.array([[[[1.0, 0.0, np.nan]]]])
    b = np.array([[[[1.0, 1.0, 3.0]]]])
    with caplog.at_level(logging.WARNING, logger="icl_gd.metrics.formulas"):
        out = M.simam(a, b)
    np.testing.assert_allclose(out, [1 / SQRT2], atol=1e-15)  # the key is dropped from both
    assert any("NaN in some inputs" in r.getMessage() for r in caplog.records)


def test_simam_all_undefined_layer_is_nan(caplog):
    a = np.zeros((2, 2, 1, 3))
    a[:, 1, 0, 0] = 1.0  # layer 0: zero maps everywhere
    with caplog.at_level(logging.WARNING, logger="icl_gd.metrics.formulas"):
        out = M.simam(a, a)
    assert np.isnan(out[0]) and out[1] == pytest.approx(1.0)
    assert any("simam" in r.getMessage() for r in caplog.records)


def test_map_metric_shape_errors():
    a = np.zeros((2, 2, 1, 3))
    with pytest.raises(ValueError):
        M.simam(a, a[:1])
    with pytest.raises(ValueError):
        M.simam(a[0], a[0])
    with pytest.raises(ValueError):
        M.simam(a, a, query_len=np.array([1, 2, 3]))


# --------------------------------------------------------------------------------------------
# nanmean and bootstrap


def test_nanmean_logs_and_handles_all_nan(caplog):
    v = np.array([[1.0, np.nan], [3.0, np.nan]])
    with caplog.at_level(logging.WARNING, logger="icl_gd.metrics.formulas"):
        out = M.nanmean(v, what="x")
    assert out[0] == 2.0 and np.isnan(out[1])
    assert any("2 of 4" in r.getMessage() for r in caplog.records)


def test_bootstrap_ci_contains_mean_and_narrows():
    rng = np.random.default_rng(0)
    small = rng.normal(0.3, 1.0, size=50)
    large = rng.normal(0.3, 1.0, size=5000)
    lo_s, hi_s = resampling.bootstrap_ci(small, n_boot=2000, seed=1)
    lo_l, hi_l = resampling.bootstrap_ci(large, n_boot=2000, seed=1)
    assert lo_s < small.mean() < hi_s
    assert lo_l < large.mean() < hi_l
    assert (hi_l - lo_l) < (hi_s - lo_s) / 5  # width ~ 1/sqrt(n): ratio ~ 10
    # the 95% interval width is about 2 * 1.96 * sd / sqrt(n)
    assert (hi_l - lo_l) == pytest.approx(2 * 1.96 * large.std() / math.sqrt(len(large)), rel=0.15)
    assert (lo_s, hi_s) == resampling.bootstrap_ci(small, n_boot=2000, seed=1)  # seeded
    lo90, hi90 = resampling.bootstrap_ci(small, n_boot=2000, seed=1, level=0.9)
    assert lo_s < lo90 < hi90 < hi_s


def test_bootstrap_ci_nan_aware_and_per_column():
    rng = np.random.default_rng(2)
    v = rng.normal(size=(400, 3))
    v[::4, 0] = np.nan
    v[:, 2] = np.nan
    lo, hi = resampling.bootstrap_ci(v, n_boot=500, seed=0)
    assert lo.shape == hi.shape == (3,)
    assert lo[0] < np.nanmean(v[:, 0]) < hi[0]
    assert lo[1] < v[:, 1].mean() < hi[1]
    assert np.isnan(lo[2]) and np.isnan(hi[2])
    lo1, hi1 = resampling.bootstrap_ci(v[:, 1], n_boot=500, seed=0)  # same resamples as column 1
    assert lo1 == pytest.approx(lo[1]) and hi1 == pytest.approx(hi[1])
    # constant data: a degenerate interval at the value
    assert resampling.bootstrap_ci(np.full(10, 0.5)) == pytest.approx((0.5, 0.5))


# --------------------------------------------------------------------------------------------
# every similarity at once, from the ZSL values and the changes (what scoring runs)


def _ragged(maps, query_len):
    """(n, L, H, Q) maps as the compact cache stores them: each example's rows cut to its keys."""
    return np.concatenate([m[:, :, :q].reshape(-1) for m, q in zip(maps, query_len)])


@pytest.mark.parametrize("scaled", [False, True])
def test_update_similarities_are_simaou_and_its_baselines(scaled, monkeypatch):
    rng = np.random.default_rng(1)
    n, n_layers, d = 23, 3, 16
    z = rng.standard_normal((n, n_layers, d))
    a, b = 0.1 * rng.standard_normal((2, n, n_layers, d))
    a[3, 1] = 0.0  # ICL left a row unchanged: every cosine of it is undefined
    b[5] = 1e-9 * rng.standard_normal((n_layers, d))  # a change far below |h|: its digits kept
    kwargs, stored_a, stored_b = {}, a, b
    if scaled:  # as the compact cache stores them: rows of largest magnitude 1, and their scales
        sa, sb = np.abs(a).max(-1), np.abs(b).max(-1)
        stored_a, stored_b = a / np.where(sa > 0, sa, 1)[..., None], b / sb[..., None]
        kwargs = dict(scale_icl=sa, scale_ft=sb)
    monkeypatch.setattr(M, "_CHUNK_ELEMENTS", n_layers * d * 4)  # ragged chunks
    out = M.update_similarities(z, stored_a, stored_b, rng=np.random.default_rng(7), **kwargs)
    expected = {
        "simaou": M.simaou(z, z + a, z + b, per_example=True),
        "simaou_norm": M.simaou(z, z + a, z + b, normalize=True, per_example=True),
        "simaou_random": M.simaou_random(z, z + a, np.random.default_rng(7), per_example=True),  # the same draws
    }
    for name, values in expected.items():
        assert np.array_equal(np.isnan(out[name]), np.isnan(values)), name
        # example 5 apart: (z + b) - z loses ~7 of float64's digits of a 1e-9 change there
        np.testing.assert_allclose(
            np.delete(out[name], 5, 0), np.delete(values, 5, 0), rtol=0, atol=1e-12, err_msg=name
        )
        np.testing.assert_allclose(out[name][5], values[5], rtol=0, atol=1e-6, err_msg=name)
    # which the changes keep: SimAOU of example 5 is the cosine of the changes themselves
    np.testing.assert_allclose(out["simaou"][5], M.cosine(a[5], b[5]), rtol=0, atol=1e-12)
    assert (
        np.isnan(out["simaou_random_gaussian"][3, 1])
        and np.isfinite(np.delete(out["simaou_random_gaussian"], 3, 0)).all()
    )
    assert set(M.update_similarities(z, a, b)) == {"simaou", "simaou_norm"}  # no rng, no baselines


def test_the_gaussian_baseline_has_the_law_of_a_cosine_with_an_isotropic_gaussian():
    """cos(y, r), r ~ N(0, I_d): mean 0, variance 1/d, whatever y; drawn as g / sqrt(g² + χ²_{d-1})."""
    rng = np.random.default_rng(3)
    n, n_layers, d = 4000, 2, 64
    z = rng.standard_normal((n, n_layers, d))
    a = 0.5 + 0.1 * rng.standard_normal((n, n_layers, d))  # an update with a positive mean
    fast = M.update_similarities(z, a, a, rng=np.random.default_rng(0))["simaou_random_gaussian"].reshape(-1)
    drawn = M.simaou_random(z, z + a, np.random.default_rng(1), kind="gaussian", per_example=True).reshape(-1)
    for sample in (fast, drawn):
        assert abs(sample.mean()) < 4 / math.sqrt(d * sample.size)
        assert abs(sample.var() * d - 1) < 0.1
    quantiles = np.linspace(0.05, 0.95, 19)
    assert np.abs(np.quantile(fast, quantiles) - np.quantile(drawn, quantiles)).max() < 0.02


def test_map_similarities_are_simam_simam_delta_and_alpha_on_unpadded_rows(monkeypatch):
    rng = np.random.default_rng(2)
    n, n_layers, n_heads, keys = 31, 2, 3, 7
    query_len = rng.integers(1, keys + 1, size=n)
    query_len[4] = 0  # no key: undefined
    m_zsl, m_icl, m_ft, m_base = (rng.standard_normal((n, n_layers, n_heads, keys)) for _ in range(4))
    m_icl[6] = m_zsl[6]  # ICL changed nothing here: SimAM_delta undefined, SimAM before 1
    pad = np.arange(keys)[None, :] >= query_len[:, None]
    for m in (m_zsl, m_icl, m_ft, m_base):
        m[np.broadcast_to(pad[:, None, None, :], m.shape)] = np.nan
    flat = lambda m: _ragged(m, query_len)  # noqa: E731
    scale = rng.uniform(0.5, 2.0, size=(3, n, n_layers))
    per_row = lambda s: np.repeat(s.reshape(-1), np.repeat(n_heads * query_len, n_layers))  # noqa: E731
    changes = [flat(m - m_zsl) / per_row(s) for m, s in zip((m_icl, m_ft, m_base), scale)]
    monkeypatch.setattr(M, "_CHUNK_ELEMENTS", 50)  # blocks of a few examples, one example over a block
    out = M.map_similarities(
        flat(m_zsl),
        *changes[:2],
        query_len,
        n_layers,
        n_heads,
        dm_base=changes[2],
        scale_icl=scale[0],
        scale_ft=scale[1],
        scale_base=scale[2],
    )
    expected = {
        "simam_before": M.simam(m_icl, m_zsl, query_len=query_len, per_example=True),
        "simam_after": M.simam(m_icl, m_ft, query_len=query_len, per_example=True),
        "simam_delta": M.simam_delta(m_zsl, m_icl, m_ft, query_len=query_len, per_example=True),
        "alpha": M.alpha(m_zsl, m_ft, m_base, query_len=query_len, per_example=True),
    }
    for name, values in expected.items():
        assert np.array_equal(np.isnan(out[name]), np.isnan(values)), name
        np.testing.assert_allclose(out[name], values, rtol=0, atol=1e-12, err_msg=name)
    assert np.isnan(out["simam_delta"][6]).all() and np.allclose(out["simam_before"][6], 1.0)
    assert "alpha" not in M.map_similarities(flat(m_zsl), *changes[:2], query_len, n_layers, n_heads)
    with pytest.raises(ValueError, match="query lengths give"):
        M.map_similarities(flat(m_zsl)[:-1], *changes[:2], query_len, n_layers, n_heads)


# --------------------------------------------------------------------------------------------
# output distributions


def test_kl_and_total_variation_closed_form():
    # two label words; the cache's log-probs are over the whole vocabulary (here 30% and 60% of its
    # mass on the label words), which the renormalisation drops
    p, q = np.array([0.5, 0.5]), np.array([0.25, 0.75])
    lp, lq = np.log(0.3 * p)[None], np.log(0.6 * q)[None]
    np.testing.assert_allclose(np.exp(M.label_log_distribution(lp)), p[None], rtol=1e-12)
    assert M.kl_divergence(lp, lq)[0] == pytest.approx(0.5 * math.log(4 / 3), rel=1e-12)
    assert M.kl_divergence(lq, lp)[0] == pytest.approx(0.25 * math.log(0.5) + 0.75 * math.log(1.5), rel=1e-12)
    assert M.total_variation(lp, lq)[0] == pytest.approx(0.25, rel=1e-12)
    assert M.kl_divergence(lp, lp)[0] == 0.0 and M.total_variation(lp, lp)[0] == 0.0
    # three words, one nearly impossible under Q: KL grows as its log-probability falls
    p3, q3 = np.log([[0.2, 0.3, 0.5]]), np.log([[0.5, 0.5 - 1e-9, 1e-9]])
    expected = 0.2 * math.log(0.2 / 0.5) + 0.3 * math.log(0.3 / (0.5 - 1e-9)) + 0.5 * math.log(0.5 / 1e-9)
    assert M.kl_divergence(p3, q3)[0] == pytest.approx(expected, rel=1e-9)
    assert M.total_variation(p3, q3)[0] == pytest.approx(0.5 * (0.3 + 0.2 + 0.5 - 1e-9), rel=1e-9)
    with pytest.raises(ValueError, match="at least 2 labels"):
        M.kl_divergence(np.zeros((3, 1)), np.zeros((3, 1)))
    with pytest.raises(ValueError, match="same shape"):
        M.total_variation(np.zeros((3, 2)), np.zeros((2, 2)))
