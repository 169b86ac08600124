"""Links that cannot rot (issue 42, item 3): every relative link and image in the README and docs/
resolves, and every file of the repository they name exists (a path in backticks, or a script a
command in them runs)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("**/*.md"))]
# Top-level folders of the repository: a backticked path under one of them must exist. Outputs
# (results/, resources/) are made by a run and not checked.
TRACKED_ROOTS = ("src", "tests", "workflow", "configs", "benchmarks", "docs", "profiles", "envs", "reports", ".ci")
FILE = re.compile(r"[\w.-]+\.(py|yaml|yml|toml|txt|smk|md|csv|rst|json)")
# Files the text names that live in a package's sdist, not in the repository.
OUTSIDE = {"movieReviewSnippets_anonDataRatings.txt", "movieReviewSnippets_GroundTruth.txt", "LICENSE.txt"}


def tracked() -> set[str]:
    out = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True)
    if out.returncode != 0:  # not a git checkout (a copied tree): what is on disk
        return {p.relative_to(REPO).as_posix() for p in REPO.rglob("*") if p.is_file()}
    return set(out.stdout.split())


def links(text: str) -> list[str]:
    return [m.group(1) for m in re.finditer(r"!?\[[^\]]*\]\(([^)\s]+)\)", text)]


def named_paths(text: str) -> list[str]:
    """Backticked tokens that name a file or folder of the repository, without templated parts."""
    found = []
    for m in re.finditer(r"`([^`\n]+)`", text):
        for token in m.group(1).split():
            token = token.strip(".,;:()'\"").split("::")[0]
            if any(c in token for c in "{}*<>$=") or token.startswith(("-", "http")):
                continue
            if token.startswith(tuple(f"{root}/" for root in TRACKED_ROOTS)) or FILE.fullmatch(token):
                found.append(token.split(":")[0])
    return found


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_relative_link_and_image_resolves(doc):
    broken = []
    for target in links(doc.read_text()):
        if re.match(r"[a-z][a-z0-9+.-]*:|#", target):  # a URL or an anchor on the page
            continue
        if not (doc.parent / target.split("#")[0]).exists():
            broken.append(target)
    assert not broken, f"{doc.name}: links to nothing: {broken}"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_file_the_text_names_exists(doc):
    files = tracked()
    names = {Path(f).name for f in files}
    folders = {str(Path(f).parent) for f in files} | {str(p) for f in files for p in Path(f).parents}
    missing = []
    for path in named_paths(doc.read_text()):
        path = path.rstrip("/")
        if path in files or path in folders or "/" in path and (REPO / path).exists():
            continue
        if "/" in path or path not in names and path not in OUTSIDE:  # a bare name: a file's, anywhere
            missing.append(path)
    assert not missing, f"{doc.name} names files that do not exist: {sorted(set(missing))}"


def test_the_checks_can_fail(tmp_path):
    text = "See [the table](reports/tables/nothing.md), `benchmarks/nothing.py` and `nothing_here.py`."
    assert links(text) == ["reports/tables/nothing.md"]
    assert named_paths(text) == ["benchmarks/nothing.py", "nothing_here.py"]
    assert named_paths("`results/{model}/x.arrow` and `--config orders=2` and `pip install -e '.[test]'`") == []


# Every section the README had before it became a front page (issue 42), and where it lives now.
HOMES = {
    "Quick start": ("README.md", "Set up, run, test"),
    "What the workflow does": ("docs/workflow.md", "What the workflow does"),
    "Configuration": ("docs/configuration.md", "Configuration"),
    "The papers' set-up": ("docs/configuration.md", "The papers' set-up"),
    "A sweep over model size": ("docs/configuration.md", "A sweep over model size"),
    "Your own task": ("docs/tasks.md", "Your own task"),
    "Real text offline": ("docs/tasks.md", "Real text offline"),
    "Demonstrations": ("docs/tasks.md", "Demonstrations"),
    "Models": ("docs/models.md", "Model sources"),
    "A real model offline": ("docs/results.md", "A real model offline"),
    "The whole protocol on a real model": ("docs/results.md", "The whole protocol on a real model"),
    "The activation cache": ("docs/cache.md", "The activation cache"),
    "Training methods": ("docs/models.md", "Training methods"),
    "Numerical precision": ("docs/precision.md", "Numerical precision"),
    "Disk": ("docs/performance.md", "Disk"),
    "Speed": ("docs/performance.md", "Speed"),
    "Beside the tools a researcher would use instead": (
        "docs/performance.md",
        "Beside the tools a researcher would use instead",
    ),
    "Every path against the machine": ("docs/performance.md", "Every path against the machine"),
    "Start-up": ("docs/performance.md", "Start-up"),
    "Metrics": ("docs/metrics.md", "Metrics"),
    "Tables": ("docs/report.md", "Tables"),
    "Figures": ("docs/report.md", "Figures"),
    "Reruns": ("docs/reruns.md", "Reruns"),
    "Provenance": ("docs/reruns.md", "Provenance"),
    "Run on a cluster": ("docs/cluster.md", "Running on a cluster"),
    "Lint": ("docs/extending.md", "Lint"),
}


def headings(path: Path) -> set[str]:
    return {line.lstrip("#").strip() for line in path.read_text().splitlines() if re.match(r"#{1,4} ", line)}


def test_every_section_of_the_old_readme_has_a_home():
    lost = {old: home for old, (doc, home) in HOMES.items() if home not in headings(REPO / doc)}
    assert not lost, f"sections without their home: {lost}"
    # the README's front page links every document of docs/
    readme = (REPO / "README.md").read_text()
    assert not [d.name for d in (REPO / "docs").glob("*.md") if f"docs/{d.name}" not in readme]
    assert len(readme.splitlines()) <= 250


def test_every_config_key_is_documented():
    import yaml

    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    doc = (REPO / "docs/configuration.md").read_text()
    missing = [key for key in schema["properties"] if f"`{key}" not in doc]
    for key, spec in schema["properties"].items():
        missing += [f"{key}.{sub}" for sub in spec.get("properties", {}) if f"`{sub}`" not in doc]
    assert not missing, f"docs/configuration.md does not name {missing}"


def test_the_readme_example_config_is_valid():
    import yaml

    from icl_gd.config import validation

    block = re.search(r"```yaml\n(.*?)```", (REPO / "README.md").read_text(), re.S).group(1)
    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    config = validation.validate(yaml.safe_load(block), schema)
    assert set(config["tasks"]) == {"sst2", "mine"} and config["models"]["pythia"]["source"] == "hub"
