"""Metrics comparing in-context learning (ICL) with fine-tuning (FT, i.e. gradient descent).

Pure array functions: numpy and the standard library only, no I/O, no config, nothing else of the
package. Every function takes arrays and returns arrays or floats. The definitions follow
docs/protocol.md ("Metrics"); the papers are

* Dai et al. 2023, "Why Can GPT Learn In-Context? Language Models Secretly Perform Gradient
  Descent as Meta-Optimizers" (SimAOU, SimAM, Rec2FTP);
* paper 001, "In-context Learning and Gradient Descent Revisited" (SimAOU_norm and its sanity
  identity, the f2t subset, LCGD and alpha, the random SimAOU baseline);
* paper 003, "Rethinking In-Context Learning as Gradient Descent" (Jaccard index of prediction
  changes).

Shapes
------
* predictions and gold labels: ``(n,)`` integer class indices;
* attention outputs ``h``: ``(n, L, D)`` (examples, layers, model width);
* pre-softmax attention maps ``m``: ``(n, L, H, Q)`` (examples, layers, heads, query keys), NaN
  past each example's query length. The valid keys of an example are the same in every setting.

Conventions
-----------
* Inputs may be float16 (the cache stores float16); everything is computed in float64.
* A cosine is *undefined* (NaN) where either vector has zero norm (the reference's
  ``torch.cosine_similarity`` would silently return 0 there). Undefined values are excluded from
  every mean; a mean with nothing left is NaN. Each metric logs a warning on
  ``logging.getLogger(__name__)`` saying how many values were undefined.
* The similarity metrics return the per-layer mean over examples, shape ``(L,)``. With
  ``per_example=True`` they return the per-example values ``(n, L)`` instead (for
  ``resampling.bootstrap_ci``, or for restricting to a subset such as :func:`f2t_mask` afterwards;
  restricting beforehand, ``h[mask]``, works too). A run's score is the mean over layers of the
  ``(L,)`` result.
* Work is vectorised over examples, layers, heads and keys; examples are processed in chunks of
  a few million elements only to bound the memory of the float64 copies.
"""

from __future__ import annotations

import logging

import numpy as np

log = logging.getLogger(__name__)

__all__ = [
    "cosine",
    "nanmean",
    "accuracy",
    "rec2ftp",
    "jaccard",
    "f2t_mask",
    "simaou",
    "simaou_random",
    "simam",
    "simam_delta",
    "alpha",
    "update_similarities",
    "map_similarities",
    "rec2ftp_terms",
    "change_sets",
    "jaccard_terms",
]

# Elements of one float64 input block processed at once (2 MiB): small blocks stay
# in cache and avoid fresh-page faults (measured ~3x faster than 32 MiB blocks); bounds memory.
_CHUNK_ELEMENTS = 1 << 18


# --------------------------------------------------------------------------------------------
# helpers


def _f64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def _cos_last(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine along the last axis of two float64 arrays of the same shape; NaN for zero norm."""
    dot = np.einsum("...k,...k->...", a, b)
    na = np.einsum("...k,...k->...", a, a)
    nb = np.einsum("...k,...k->...", b, b)
    denom = np.sqrt(na * nb)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(denom > 0, dot / denom, np.nan)  # zero norm: undefined
    return np.clip(out, -1.0, 1.0)  # rounding may overshoot |cos| = 1 by an ulp


def _chunks(n: int, per_example: int):
    """Slices over the first axis holding about ``_CHUNK_ELEMENTS`` elements each."""
    step = _chunk_step(per_example)
    for start in range(0, n, step):
        yield slice(start, min(n, start + step))


def _chunk_step(per_example: int) -> int:
    return max(1, _CHUNK_ELEMENTS // max(1, per_example))


class _Buffers:
    """Float64 work buffers of one chunk, allocated once per call and reused for every chunk.

    Fresh multi-megabyte arrays per chunk cost page faults that dominate the arithmetic, so each
    chunk is cast (float16 -> float64) into these buffers and worked on in place.
    """

    def __init__(self, k: int, shape: tuple[int, ...]):
        self._full = [np.empty(shape) for _ in range(k)]

    def load(self, arrays, sl: slice) -> list[np.ndarray]:
        """Views of every buffer trimmed to the chunk, the first ``len(arrays)`` filled from
        ``arrays[sl]`` (the rest left for the caller to fill)."""
        c = sl.stop - sl.start
        views = [buf[:c] for buf in self._full]
        for view, array in zip(views, arrays):
            np.copyto(view, array[sl])
        return views


def nan_mean0(values: np.ndarray) -> np.ndarray:
    """Mean over axis 0 ignoring NaN, NaN where nothing is left (no RuntimeWarning)."""
    valid = ~np.isnan(values)
    count = valid.sum(axis=0)
    total = np.where(valid, values, 0.0).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = total / count
    return np.where(count > 0, mean, np.nan)


def _warn_undefined(values: np.ndarray, what: str, where: str) -> None:
    n_bad = int(np.isnan(values).sum())
    if n_bad:
        log.warning(
            "%s: %d of %d %s undefined (zero-norm vector); excluded from the mean",
            what,
            n_bad,
            values.size,
            where,
        )


def nanmean(values, axis: int = 0, what: str = "values"):
    """Mean along ``axis`` excluding NaN (undefined) entries; NaN where none is left.

    Logs a warning counting the NaN entries (``what`` names them in the message) and another
    naming how many output entries (e.g. layers) had no defined value at all.
    """
    v = np.moveaxis(_f64(values), axis, 0)
    _warn_undefined(v, what, "entries")
    mean = nan_mean0(v)
    n_empty = int(np.isnan(mean).sum())
    if n_empty:
        log.warning("%s: %d outputs have no defined value and are NaN", what, n_empty)
    return float(mean) if np.ndim(mean) == 0 else mean


def _check_same_shape(ndim: int, *arrays: np.ndarray, names: tuple[str, ...]) -> None:
    shapes = {a.shape for a in arrays}
    if len(shapes) != 1:
        raise ValueError(f"{', '.join(names)} must have the same shape, got {[a.shape for a in arrays]}")
    if arrays[0].ndim != ndim:
        raise ValueError(f"{names[0]} must have {ndim} dimensions, got shape {arrays[0].shape}")


def _labels(*arrays, names: tuple[str, ...]) -> list[np.ndarray]:
    out = [np.asarray(a).reshape(-1) if np.ndim(a) == 0 else np.asarray(a) for a in arrays]
    if any(a.ndim != 1 for a in out) or len({a.shape for a in out}) != 1:
        raise ValueError(f"{', '.join(names)} must be 1-d of equal length, got {[a.shape for a in out]}")
    return out


def _l2_normalise_(x: np.ndarray) -> None:
    """x /= ||x|| along the last axis, in place; a zero vector becomes NaN (0/0), so every cosine
    involving it is undefined."""
    norm = np.sqrt(np.einsum("...k,...k->...", x, x))
    with np.errstate(invalid="ignore", divide="ignore"):
        np.divide(x, norm[..., None], out=x)


def change_agreement(h_zsl, h_ft, h_zsl_ref, h_ft_ref) -> tuple[np.ndarray, float]:
    """How a change of the attention outputs, dh = h_FT - h_ZSL, agrees with a reference run's
    (the same run in float32: issue 27's precision check, ``benchmarks/precision.py``).

    Returns, per layer, the mean over examples of cos(dh, dh_ref), shape (L,); and the norm ratio
    |dh| / |dh_ref| over every example, layer and dimension. Shapes (n, L, D); float64 throughout."""
    arrays = [_f64(x) for x in (h_zsl, h_ft, h_zsl_ref, h_ft_ref)]
    _check_same_shape(3, *arrays, names=("h_zsl", "h_ft", "h_zsl_ref", "h_ft_ref"))
    change, reference = arrays[1] - arrays[0], arrays[3] - arrays[2]
    per_layer = nanmean(cosine(change, reference), what="change_agreement cosines")
    return per_layer, float(np.linalg.norm(change) / np.linalg.norm(reference))


# --------------------------------------------------------------------------------------------
# generic


def cosine(a, b, axis: int = -1) -> np.ndarray:
    """Cosine similarity along ``axis``: cos(a, b) = a·b / (||a|| ||b||), computed in float64.

    Inputs broadcast against each other. Where ``a`` or ``b`` has zero norm the cosine is
    undefined and returned as NaN (not 0, as ``torch.cosine_similarity`` would give); NaN inside
    a vector also gives NaN. Values are clipped to [-1, 1]. This function does not log: callers
    average with nan-aware means (:func:`nanmean`), which log how many values were undefined.
    """
    a, b = np.broadcast_arrays(_f64(a), _f64(b))
    out = _cos_last(np.moveaxis(a, axis, -1), np.moveaxis(b, axis, -1))
    return float(out) if out.ndim == 0 else out


def accuracy(pred, gold) -> float:
    """Fraction of correct predictions, mean(pred == gold), in [0, 1]. NaN (with a warning) if empty."""
    pred, gold = _labels(pred, gold, names=("pred", "gold"))
    if pred.size == 0:
        log.warning("accuracy: no examples; returning NaN")
        return float("nan")
    return float(np.mean(pred == gold))


# --------------------------------------------------------------------------------------------
# output distributions (Shen, Mishra and Khashabi 2023; docs/protocol.md, "Output distributions")


def label_log_distribution(label_logprobs) -> np.ndarray:
    """(n, C) log-probabilities of the C label words renormalised over them (float64):
    log p(y | x) = l_y - logsumexp_c l_c, from the log-softmax over the vocabulary ``label_logprobs``
    that a cache holds (the rest of the vocabulary's mass drops out)."""
    logp = _f64(label_logprobs)
    if logp.ndim != 2 or logp.shape[1] < 2:
        raise ValueError(f"label_logprobs must be (n, labels) with at least 2 labels, got shape {logp.shape}")
    top = logp.max(axis=1, keepdims=True)
    return logp - (top + np.log(np.exp(logp - top).sum(axis=1, keepdims=True)))


def kl_divergence(logprobs_p, logprobs_q) -> np.ndarray:
    """Per example, KL(P || Q) = sum_y p(y) (log p(y) - log q(y)) in nats, P and Q the label
    distributions (renormalised over the label words, :func:`label_log_distribution`) of two
    settings' ``label_logprobs``. Non-negative, 0 where the two agree, not symmetric."""
    lp, lq = label_log_distribution(logprobs_p), label_log_distribution(logprobs_q)
    _check_same_shape(2, lp, lq, names=("logprobs_p", "logprobs_q"))
    return np.maximum((np.exp(lp) * (lp - lq)).sum(axis=1), 0.0)  # rounding can dip below 0


def total_variation(logprobs_p, logprobs_q) -> np.ndarray:
    """Per example, TV(P, Q) = 1/2 sum_y |p(y) - q(y)| over the renormalised label distributions,
    in [0, 1]."""
    lp, lq = label_log_distribution(logprobs_p), label_log_distribution(logprobs_q)
    _check_same_shape(2, lp, lq, names=("logprobs_p", "logprobs_q"))
    return 0.5 * np.abs(np.exp(lp) - np.exp(lq)).sum(axis=1)


# --------------------------------------------------------------------------------------------
# prediction-level metrics


def f2t_mask(pred_zsl, pred_icl, pred_ft, gold) -> np.ndarray:
    """The f2t ("false to true") subset of paper 001: ZSL wrong, and both ICL and FT right.

    mask = (pred_ZSL != gold) & (pred_ICL == gold) & (pred_FT == gold), a boolean (n,) array.
    """
    z, i, f, g = _labels(pred_zsl, pred_icl, pred_ft, gold, names=("pred_zsl", "pred_icl", "pred_ft", "gold"))
    return (z != g) & (i == g) & (f == g)


def rec2ftp_terms(pred_zsl, pred_icl, pred_ft, gold) -> tuple[np.ndarray, np.ndarray]:
    """Per-example numerator and denominator of :func:`rec2ftp` (0/1 each, float64):
    num_i = ICL correct ∧ FT correct ∧ ZSL wrong, den_i = FT correct ∧ ZSL wrong.
    Rec2FTP = 100 · Σ num / Σ den; a bootstrap resamples the terms (``resampling.bootstrap_ratios``)."""
    z, i, f, g = _labels(pred_zsl, pred_icl, pred_ft, gold, names=("pred_zsl", "pred_icl", "pred_ft", "gold"))
    fixed_by_ft = (f == g) & (z != g)
    return (fixed_by_ft & (i == g)).astype(np.float64), fixed_by_ft.astype(np.float64)


def rec2ftp(pred_zsl, pred_icl, pred_ft, gold) -> float:
    """Recall to fine-tuning predictions (Dai et al. 2023), in percent.

    Rec2FTP = 100 · |ICL correct ∧ FT correct ∧ ZSL wrong| / |FT correct ∧ ZSL wrong|,
    i.e. of the examples FT fixed relative to ZSL, the share ICL fixed too. An empty denominator
    (FT fixed nothing) gives NaN with a logged warning, never 0.
    """
    num, den = rec2ftp_terms(pred_zsl, pred_icl, pred_ft, gold)
    if den.sum() == 0:
        log.warning("rec2ftp: FT corrects no example that ZSL gets wrong; Rec2FTP is undefined (NaN)")
        return float("nan")
    return 100.0 * float(num.sum()) / float(den.sum())


def change_sets(pred_zsl, pred_icl, pred_ft, gold, subset: str = "all") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The boolean (n,) sets of paper 003's prediction changes: D_ICL, D_FT (prediction differs
    from ZSL; ``subset="correct"`` / ``"incorrect"`` keeps the changes whose new label is right /
    wrong) and their intersection, which counts an example only if ICL and FT changed it to the
    same label."""
    if subset not in ("all", "correct", "incorrect"):
        raise ValueError(f"subset must be 'all', 'correct' or 'incorrect', got {subset!r}")
    z, i, f, g = _labels(pred_zsl, pred_icl, pred_ft, gold, names=("pred_zsl", "pred_icl", "pred_ft", "gold"))
    d_icl = i != z
    d_ft = f != z
    if subset == "correct":
        d_icl &= i == g
        d_ft &= f == g
    elif subset == "incorrect":
        d_icl &= i != g
        d_ft &= f != g
    return d_icl, d_ft, d_icl & d_ft & (i == f)


def jaccard_terms(pred_zsl, pred_icl, pred_ft, gold, subset: str = "all") -> tuple[np.ndarray, np.ndarray]:
    """Per-example numerator and denominator of :func:`jaccard` (float64):
    num_i = 1 if ICL and FT changed example i to the same label, den_i = [i ∈ D_ICL] + [i ∈ D_FT]
    − num_i (0, 1 or 2), so that J = Σ num / Σ den."""
    d_icl, d_ft, inter = change_sets(pred_zsl, pred_icl, pred_ft, gold, subset)
    inter = inter.astype(np.float64)
    return inter, d_icl + d_ft.astype(np.float64) - inter


def jaccard(pred_zsl, pred_icl, pred_ft, gold, subset: str = "all") -> float:
    """Jaccard index of the prediction changes of ICL and FT (paper 003), a fraction in [0, 1].

    D_S = {examples whose setting-S prediction differs from the ZSL prediction}, S ∈ {ICL, FT};
    D_ICL ∩ D_FT counts an example only if ICL and FT changed it *to the same label*;
    J = |D_ICL ∩ D_FT| / (|D_ICL| + |D_FT| − |D_ICL ∩ D_FT|).
    ``subset="correct"`` / ``"incorrect"`` restricts every set to changes whose new label is right
    / wrong (an intersection member has one new label, so its correctness is shared). An empty
    union (no changes at all) gives NaN with a logged warning. Paper 003 reports 100·J.
    """
    num, den = jaccard_terms(pred_zsl, pred_icl, pred_ft, gold, subset)
    if den.sum() == 0:
        log.warning("jaccard(%s): neither ICL nor FT changes any prediction; undefined (NaN)", subset)
        return float("nan")
    return float(num.sum()) / float(den.sum())


# --------------------------------------------------------------------------------------------
# attention-output similarity


def simaou(h_zsl, h_icl, h_ft, normalize: bool = False, per_example: bool = False) -> np.ndarray:
    """Similarity of attention output updates (Dai et al. 2023; normalised form: paper 001).

    SimAOU_l = mean_i cos(h_ICL[i,l] − h_ZSL[i,l], h_FT[i,l] − h_ZSL[i,l]).
    ``normalize=True`` gives SimAOU_norm: each h is first l2-normalised, ĥ = h / ||h|| (what the
    reference code reports as "SimAOU"). Shapes (n, L, D) → (L,) (or (n, L) with
    ``per_example``). Undefined cosines (an update of zero norm, e.g. ICL output identical to ZSL
    output) are excluded from the mean and counted in a logged warning.
    """
    z, i, f = (np.asarray(x) for x in (h_zsl, h_icl, h_ft))
    _check_same_shape(3, z, i, f, names=("h_zsl", "h_icl", "h_ft"))
    n, n_layers, width = z.shape
    out = np.empty((n, n_layers))
    bufs = _Buffers(3, (_chunk_step(n_layers * width), n_layers, width))
    for sl in _chunks(n, n_layers * width):
        zc, ic, fc = bufs.load((z, i, f), sl)
        if normalize:
            for x in (zc, ic, fc):
                _l2_normalise_(x)
        np.subtract(ic, zc, out=ic)
        np.subtract(fc, zc, out=fc)
        out[sl] = _cos_last(ic, fc)
    name = "simaou_norm" if normalize else "simaou"
    if per_example:
        _warn_undefined(out, name, "cosines")
        return out
    return nanmean(out, what=f"{name} cosines")


def simaou_random(h_zsl, h_icl, rng, kind: str = "uniform", per_example: bool = False) -> np.ndarray:
    """Random SimAOU baseline (reference form, paper 001 / Dai et al. 2023 reference code).

    Random_l = mean_i cos(ĥ_ICL[i,l] − ĥ_ZSL[i,l], r[i,l]), ĥ = h / ||h||, with the random
    "update" r drawn independently per example and layer (a D-vector):
    ``kind="uniform"``: r ~ U[0, 1)^D, as in the reference (not centred, so it has a positive
    bias whenever the ICL update has a positive mean component); ``kind="gaussian"``:
    r ~ N(0, I_D), the intended null (mean 0, spread ~1/sqrt(D)).
    ``rng`` is a ``numpy.random.Generator`` seeded by the caller; draws are consumed in example
    order, so the result is deterministic for a given seed and input. Shapes (n, L, D) → (L,).
    """
    if kind not in ("uniform", "gaussian"):
        raise ValueError(f"kind must be 'uniform' or 'gaussian', got {kind!r}")
    if not isinstance(rng, np.random.Generator):
        raise TypeError("rng must be a numpy.random.Generator (np.random.default_rng(seed))")
    z, i = np.asarray(h_zsl), np.asarray(h_icl)
    _check_same_shape(3, z, i, names=("h_zsl", "h_icl"))
    n, n_layers, width = z.shape
    out = np.empty((n, n_layers))
    step = _chunk_step(n_layers * width)
    bufs = _Buffers(3, (step, n_layers, width))
    for sl in _chunks(n, n_layers * width):
        zc, ic, r = bufs.load((z, i), sl)
        if kind == "uniform":  # fills r in order: the same draws as one (n, L, D) call
            rng.random(out=r)
        else:
            rng.standard_normal(out=r)
        _l2_normalise_(zc)
        _l2_normalise_(ic)
        np.subtract(ic, zc, out=ic)
        out[sl] = _cos_last(ic, r)
    name = f"simaou_random({kind})"
    if per_example:
        _warn_undefined(out, name, "cosines")
        return out
    return nanmean(out, what=f"{name} cosines")


# --------------------------------------------------------------------------------------------
# attention-map similarity


def _key_mask(query_len, n: int, n_keys: int) -> np.ndarray | None:
    if query_len is None:
        return None
    q = np.asarray(query_len).reshape(-1)
    if q.shape != (n,):
        raise ValueError(f"query_len must have shape ({n},), got {np.shape(query_len)}")
    return np.arange(n_keys)[None, :] < q[:, None]  # (n, Q) True on valid keys


def _map_cosines(pairs, maps, names, query_len, what: str, per_example: bool) -> np.ndarray:
    """Shared machinery of simam / simam_delta / alpha.

    ``pairs(chunks)`` maps the float64 chunks of ``maps`` to the two (c, L, H, Q) arrays to
    compare. Keys are valid below ``query_len`` if given (anything past it is ignored; a NaN
    before it makes that head's cosine undefined); otherwise a key is valid where no input is NaN.
    Per (example, layer, head): cosine over valid keys; mean over heads (undefined heads
    excluded); then mean over examples.
    """
    arrays = [np.asarray(m) for m in maps]
    _check_same_shape(4, *arrays, names=names)
    n, n_layers, n_heads, n_keys = arrays[0].shape
    key_valid = _key_mask(query_len, n, n_keys)
    per_head = np.empty((n, n_layers, n_heads))
    step = _chunk_step(n_layers * n_heads * n_keys)
    bufs = _Buffers(len(arrays), (step, n_layers, n_heads, n_keys))
    if key_valid is None:
        nan_full = np.empty((len(arrays) + 1, step, n_layers, n_heads, n_keys), dtype=bool)
    mismatched = 0
    for sl in _chunks(n, n_layers * n_heads * n_keys):
        chunks = bufs.load(arrays, sl)
        c = sl.stop - sl.start
        if key_valid is None:
            # a key is padding where any input is NaN; count keys where the inputs disagree
            nan = nan_full[:, :c]
            for j, chunk in enumerate(chunks):
                np.isnan(chunk, out=nan[j])
            pad = np.logical_or.reduce(nan[:-1], axis=0, out=nan[-1])
            mismatched += len(chunks) * int(np.count_nonzero(pad)) - int(np.count_nonzero(nan[:-1]))
        else:
            pad = np.broadcast_to(~key_valid[sl][:, None, None, :], chunks[0].shape)
        a, b = pairs(chunks)  # in place on the buffers
        np.copyto(a, 0.0, where=pad)  # padding contributes nothing to dots and norms
        np.copyto(b, 0.0, where=pad)
        per_head[sl] = _cos_last(a, b)
    if mismatched:
        log.warning(
            "%s: %d key scores are NaN in some inputs but not in others; those keys were dropped "
            "from every input (the valid keys of an example should agree across settings)",
            what,
            mismatched,
        )
    _warn_undefined(per_head, what, "per-head cosines")
    per_ex = nan_mean0(np.moveaxis(per_head, -1, 0))  # mean over heads, (n, L)
    if per_example:
        return per_ex
    return nanmean(per_ex, what=f"{what} per-example values")


def _deltas(chunks):
    """(c1 - c0, c2 - c0), computed in place in the buffers of c1 and c2."""
    np.subtract(chunks[1], chunks[0], out=chunks[1])
    np.subtract(chunks[2], chunks[0], out=chunks[2])
    return chunks[1], chunks[2]


def simam(m_a, m_b, query_len=None, per_example: bool = False) -> np.ndarray:
    """Similarity of attention maps (Dai et al. 2023), SimAM_l = mean_i mean_h cos(m_a, m_b).

    The cosine runs over the valid query keys of the pre-softmax scores of each (example i,
    layer l, head h), then is averaged over heads, then over examples. SimAM before =
    ``simam(m_icl, m_zsl)``, SimAM after = ``simam(m_icl, m_ft)``. Shapes (n, L, H, Q) → (L,)
    (or (n, L) with ``per_example``). Padding: NaN past each example's query length, or an
    explicit ``query_len`` (n,) (keys ``q >= query_len[i]`` ignored).
    """
    return _map_cosines(lambda c: (c[0], c[1]), (m_a, m_b), ("m_a", "m_b"), query_len, "simam", per_example)


def simam_delta(m_zsl, m_icl, m_ft, query_len=None, per_example: bool = False) -> np.ndarray:
    """Similarity of attention-map updates (paper 001), SimAM_delta_l =
    mean_i mean_h cos(m_ICL − m_ZSL, m_FT − m_ZSL), averaged like :func:`simam`."""
    return _map_cosines(
        _deltas,
        (m_zsl, m_icl, m_ft),
        ("m_zsl", "m_icl", "m_ft"),
        query_len,
        "simam_delta",
        per_example,
    )


def alpha(m_zsl, m_lcgd, m_gd, query_len=None, per_example: bool = False) -> np.ndarray:
    """alpha of paper 001 (Fig. 2): how aligned layer-causal GD is with vanilla GD,
    alpha_l = mean_i mean_h cos(m_LCGD − m_ZSL, m_GD − m_ZSL), averaged like :func:`simam`."""
    return _map_cosines(
        _deltas,
        (m_zsl, m_lcgd, m_gd),
        ("m_zsl", "m_lcgd", "m_gd"),
        query_len,
        "alpha",
        per_example,
    )


# --------------------------------------------------------------------------------------------
# every similarity of a run at once, from the ZSL values and the changes


def _ratio(num: np.ndarray, den_squared: np.ndarray) -> np.ndarray:
    """num / sqrt(den_squared), NaN where the denominator is zero or undefined, clipped to [-1, 1]."""
    with np.errstate(invalid="ignore", divide="ignore"):
        den = np.sqrt(den_squared)
        out = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)
    return np.clip(out, -1.0, 1.0)


def _scaled(scale, shape) -> np.ndarray | float:
    return 1.0 if scale is None else np.asarray(scale, dtype=np.float64).reshape(shape)


def _normalised_updates(zz, za, zb, aa, bb, ab):
    """From the dot products of z (ZSL), a and b (two changes): the cosine of the normalised updates,
    cos(ẑa − ẑ, ẑb − ẑ) with ẑa = (z + a) / |z + a|; and, for a's update, its direction's
    coefficient c_a and squared norm, as ẑa − ẑ = (a − c_a z) / |z + a|.

    c_a = (|z + a| − |z|) / |z| = (2 z·a + a·a) / (|z| (|z + a| + |z|)) has no cancellation, so a
    change far below |z| keeps its digits."""
    with np.errstate(invalid="ignore", divide="ignore"):
        nz = np.sqrt(zz)
        na, nb = np.sqrt(np.maximum(zz + 2 * za + aa, 0.0)), np.sqrt(np.maximum(zz + 2 * zb + bb, 0.0))
        ca, cb = (2 * za + aa) / (nz * (na + nz)), (2 * zb + bb) / (nz * (nb + nz))
    ya = np.maximum(aa - 2 * ca * za + ca * ca * zz, 0.0)
    yb = np.maximum(bb - 2 * cb * zb + cb * cb * zz, 0.0)
    cosine = _ratio(ab - cb * za - ca * zb + ca * cb * zz, ya * yb)
    defined_a = (nz > 0) & (na > 0)
    return np.where(defined_a & (nb > 0), cosine, np.nan), ca, ya, defined_a


def update_similarities(h_zsl, dh_icl, dh_ft, *, scale_icl=None, scale_ft=None, rng=None) -> dict[str, np.ndarray]:
    """SimAOU and SimAOU_norm of every example and layer, (n, L) each, from the ZSL outputs and the
    two changes, dh_S = h_S − h_ZSL; with ``rng``, also the random baselines of :func:`simaou_random`.

    The same values as :func:`simaou` and :func:`simaou_random` (tests/unit/metrics/test_formulas.py), in one
    pass over the arrays: per (example, layer) the dot products of z = h_ZSL, a = dh_ICL and
    b = dh_FT (and of a uniform r) are summed in float64, and every cosine follows from them.
    ``scale_icl`` / ``scale_ft`` (n, L), when given, multiply each row of their change (the compact
    cache stores a change as float16 rows of largest magnitude 1 and each row's scale).

    The uniform baseline draws r ~ U[0, 1)^D per example and layer in example order, the draws of
    :func:`simaou_random`. The Gaussian one needs no D-vector: for r ~ N(0, I_D) and any fixed
    y ≠ 0, cos(y, r) has the law of g / sqrt(g² + χ²_{D−1}) with g ~ N(0, 1) (rotational
    invariance), so two draws per example and layer give it exactly; it is NaN where y, the
    normalised ICL update, is zero. Its draws follow the uniform ones."""
    z0, a0, b0 = (np.asarray(x) for x in (h_zsl, dh_icl, dh_ft))
    _check_same_shape(3, z0, a0, b0, names=("h_zsl", "dh_icl", "dh_ft"))
    n, n_layers, width = z0.shape
    pairs = {"zz": (0, 0), "za": (0, 1), "zb": (0, 2), "aa": (1, 1), "bb": (2, 2), "ab": (1, 2)}
    if rng is not None:
        pairs.update(rz=(3, 0), ra=(3, 1), rr=(3, 3))
    dots = {key: np.empty((n, n_layers)) for key in pairs}
    bufs = _Buffers(4 if rng is not None else 3, (_chunk_step(n_layers * width), n_layers, width))
    for sl in _chunks(n, n_layers * width):
        chunks = bufs.load((z0, a0, b0), sl)
        if rng is not None:
            rng.random(out=chunks[3])
        for key, (i, j) in pairs.items():
            dots[key][sl] = np.einsum("...k,...k->...", chunks[i], chunks[j])
    sa, sb = _scaled(scale_icl, (n, n_layers)), _scaled(scale_ft, (n, n_layers))
    zz, za, zb = dots["zz"], dots["za"] * sa, dots["zb"] * sb
    aa, bb, ab = dots["aa"] * sa * sa, dots["bb"] * sb * sb, dots["ab"] * sa * sb
    out = {"simaou": _ratio(ab, aa * bb)}
    out["simaou_norm"], ca, ya, defined = _normalised_updates(zz, za, zb, aa, bb, ab)
    if rng is not None:
        uniform = _ratio(dots["ra"] * sa - ca * dots["rz"], ya * dots["rr"])
        out["simaou_random"] = np.where(defined, uniform, np.nan)
        g = rng.standard_normal((n, n_layers))
        rest = rng.chisquare(width - 1, size=(n, n_layers)) if width > 1 else np.zeros((n, n_layers))
        out["simaou_random_gaussian"] = np.where(defined & (ya > 0), g / np.sqrt(g * g + rest), np.nan)
    for name, values in out.items():
        _warn_undefined(values, name, "cosines")
    return out


def map_similarities(
    m_zsl,
    dm_icl,
    dm_ft,
    query_len,
    n_layers: int,
    n_heads: int,
    *,
    dm_base=None,
    scale_icl=None,
    scale_ft=None,
    scale_base=None,
) -> dict[str, np.ndarray]:
    """SimAM before and after, SimAM_delta and, given the baseline method's change ``dm_base``,
    alpha, of every example and layer, (n, L) each: the values of :func:`simam`,
    :func:`simam_delta` and :func:`alpha` (tests/unit/metrics/test_formulas.py), in one pass.

    The maps are flat and unpadded: example i holds its L x H rows of ``query_len[i]`` keys, in
    that order, in ``m_zsl`` (the ZSL scores) and in each change dm_S = m_S − m_ZSL; a row's scale
    (``scale_*``, (n, L), for every head of the layer) multiplies it where given. Per (example,
    layer, head), the dot products over the row's keys are summed in float64; the cosines follow
    from them, then the mean over heads (undefined heads excluded)."""
    q = np.asarray(query_len, dtype=np.int64).reshape(-1)
    n, rows_per_example = len(q), n_layers * n_heads
    arrays = [np.asarray(x).reshape(-1) for x in (m_zsl, dm_icl, dm_ft, *([dm_base] if dm_base is not None else []))]
    offsets = np.concatenate([[0], np.cumsum(rows_per_example * q)])
    if any(a.size != offsets[-1] for a in arrays):
        raise ValueError(f"the maps hold {[a.size for a in arrays]} values; the query lengths give {offsets[-1]}")
    pairs = {"zz": (0, 0), "za": (0, 1), "zb": (0, 2), "aa": (1, 1), "bb": (2, 2), "ab": (1, 2)}
    if dm_base is not None:
        pairs.update(cc=(3, 3), bc=(2, 3))
    dots = {key: np.empty((n, rows_per_example)) for key in pairs}
    block = max(_CHUNK_ELEMENTS, int((offsets[1:] - offsets[:-1]).max(initial=0)))
    buffers = [np.empty(block) for _ in arrays]
    product = np.empty(block)
    start = 0
    while start < n:
        # the examples from ``start`` whose rows fit one block (at least one)
        stop = max(start + 1, int(np.searchsorted(offsets, offsets[start] + block, side="right")) - 1)
        low, size = offsets[start], offsets[stop] - offsets[start]
        views = [buf[:size] for buf in buffers]
        for view, array in zip(views, arrays):
            np.copyto(view, array[low : low + size])
        row_starts = (offsets[start:stop, None] - low + q[start:stop, None] * np.arange(rows_per_example)).reshape(-1)
        filled = np.repeat(q[start:stop] > 0, rows_per_example)  # an empty row sums to 0 (a NaN cosine)
        for key, (i, j) in pairs.items():
            np.multiply(views[i], views[j], out=product[:size])
            sums = np.zeros(len(row_starts))
            if filled.any():
                sums[filled] = np.add.reduceat(product[:size], row_starts[filled])
            dots[key][start:stop] = sums.reshape(stop - start, rows_per_example)
        start = stop
    shape = (n, n_layers, n_heads)
    dots = {key: value.reshape(shape) for key, value in dots.items()}
    per_scale = (n, n_layers, 1)
    sa, sb, sc = (_scaled(s, per_scale) for s in (scale_icl, scale_ft, scale_base))
    zz, za, zb = dots["zz"], dots["za"] * sa, dots["zb"] * sb
    aa, bb, ab = dots["aa"] * sa * sa, dots["bb"] * sb * sb, dots["ab"] * sa * sb
    icl, ft = zz + 2 * za + aa, zz + 2 * zb + bb  # |m_ICL|², |m_FT|²
    per_head = {
        "simam_before": _ratio(zz + za, icl * zz),
        "simam_after": _ratio(zz + za + zb + ab, icl * ft),
        "simam_delta": _ratio(ab, aa * bb),
    }
    if dm_base is not None:
        per_head["alpha"] = _ratio(dots["bc"] * sb * sc, bb * dots["cc"] * sc * sc)
    out = {}
    for name, values in per_head.items():
        _warn_undefined(values, name, "per-head cosines")
        out[name] = nan_mean0(np.moveaxis(values, -1, 0))
    return out
