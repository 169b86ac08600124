"""Rerun shipped reports from clean clones of one commit, each run's wall time and host beside
`cost_estimate`'s prediction (issue 82, item 4: every shipped report from today's code).

Each config gets its own clone (``<into>/<name>``; runs of two configs share ``results/``, so one
folder cannot hold both), checked out at ``--commit``, with the set-up's downloads
(``resources/packages``) copied in, as a fresh clone after ``make setup`` would have them. Then,
one after another: ``snakemake --cores N`` (with ``--rerun-incomplete``, so that a run cut short,
by a session's end or a pause, goes on where it stopped when this is called again), and
``snakemake cost_estimate`` and ``benchmarks/cost_check.py --markdown`` in the same clone. Every
start and end is appended to ``<into>/times.tsv`` (name, commit, host with its CPU, event, UTC
time, wall seconds less pauses, exit status, seconds paused), so that the wall time of a run made in
several pieces is their sum. A pause (SIGSTOP of this script's process group, to measure something
else on the same cores, then SIGCONT) is left out: it stops this script too, whose heartbeat, woken
late, counts the gap. A piece killed without a word (SIGKILL at a session's end) gets its end row
from its last heartbeat (``<into>/<name>.piece``, rc ``killed``) when the script is called again.

    python benchmarks/rerun_reports.py --commit cf5b623 --into ../reruns \\
        default= reader=configs/reader-protocol.yaml smollm2=configs/smollm2-protocol.yaml

A name with nothing after ``=`` runs the default config. The report of each is then in
``<into>/<name>/<report.dir>``, to be copied over the shipped one.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TIMES = "times.tsv"
COLUMNS = ("name", "commit", "host", "event", "utc", "wall_s", "rc", "paused_s")
TICK = 1.0  # seconds between heartbeats
PAUSE_GAP = 2.0  # a heartbeat this much later than due was a pause, not a busy host


def _git(folder: Path, *words: str) -> str:
    return subprocess.run(["git", "-C", str(folder), *words], check=True, capture_output=True, text=True).stdout.strip()


def clone_at(source: Path, commit: str, dest: Path) -> str:
    """``dest``, a clone of ``source`` at ``commit`` (made if missing; one already there must be at
    that commit with no change of its own outside ``reports/``, or this stops, naming it). Returns
    the full commit."""
    if dest.exists():
        head = _git(dest, "rev-parse", "HEAD")
        try:
            wanted = _git(dest, "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}")
        except subprocess.CalledProcessError:
            wanted = None  # a commit made after the clone
        if head != wanted:
            raise SystemExit(f"{dest} is at {head[:10]}, not {commit}: remove it, or pass --into another folder")
        # its reports are the run's outputs (tracked, as the shipped ones are): any other change is not
        if _git(dest, "status", "--porcelain", "--untracked-files=no", "--", ".", ":!reports"):
            raise SystemExit(f"{dest} has changes of its own (git status): a rerun must come from a clean clone")
        return head
    subprocess.run(["git", "clone", "--quiet", str(source), str(dest)], check=True)
    subprocess.run(["git", "-C", str(dest), "checkout", "--quiet", commit], check=True)
    return _git(dest, "rev-parse", "HEAD")


def machine(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The host in words: its name, its CPU's model and the widest vector instructions it has. A
    name does not tell two machines apart (one VM image gives every host the same), and the vector
    instructions pick torch's float kernels, whose last bits a finetuning at a high rate grows into
    another model (docs/results.md, "The whole protocol on a real model")."""
    host = socket.gethostname()
    try:
        lines = cpuinfo.read_text().splitlines()
    except OSError:  # not Linux
        return f"{host} ({platform.processor() or platform.machine()})"
    model = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), platform.machine())
    flags = set(next((line.split(":", 1)[1].split() for line in lines if line.startswith("flags")), []))
    widest = next((label for flag, label in (("avx512f", "AVX-512"), ("avx2", "AVX2")) if flag in flags), None)
    return f"{host} ({model}, {widest})" if widest else f"{host} ({model})"


def record(
    into: Path,
    name: str,
    commit: str,
    event: str,
    wall_s: float | None = None,
    rc: int | str | None = None,
    paused_s: float | None = None,
    when: float | None = None,
):
    """Append one row to ``<into>/times.tsv`` (its header first, where the file is new); ``when``, a
    POSIX time, for an event that happened before now."""
    path = into / TIMES
    new = not path.exists()
    with path.open("a") as out:
        if new:
            out.write("\t".join(COLUMNS) + "\n")
        moment = datetime.datetime.fromtimestamp(time.time() if when is None else when, datetime.timezone.utc)
        seconds = ["" if x is None else f"{x:.0f}" for x in (wall_s, paused_s)]
        utc = moment.strftime("%Y-%m-%dT%H:%M:%SZ")
        cells = [name, commit[:10], machine(), event, utc, seconds[0], "" if rc is None else str(rc), seconds[1]]
        out.write("\t".join(cells) + "\n")


class Piece:
    """One stretch of a run, timed less its pauses, its running total kept in ``<into>/<name>.piece``
    at every heartbeat so that a piece killed without a word still counts (:func:`recover`)."""

    def __init__(self, into: Path, name: str, commit: str):
        self.into, self.name, self.commit = into, name, commit
        self.path = into / f"{name}.piece"
        self.paused = 0.0
        self._done = threading.Event()

    def begin(self) -> Piece:
        recover(self.into, self.name)
        record(self.into, self.name, self.commit, "start")
        self.start = time.monotonic()
        self._save()
        self._beat = threading.Thread(target=self._heartbeat, daemon=True)
        self._beat.start()
        return self

    def _heartbeat(self) -> None:
        last = time.monotonic()
        while not self._done.wait(TICK):
            now = time.monotonic()
            if now - last > TICK + PAUSE_GAP:  # the whole process group was stopped, this thread too
                self.paused += now - last - TICK
            last = now
            self._save()

    def _wall(self) -> float:
        return time.monotonic() - self.start - self.paused

    def _save(self) -> None:
        wall = self._wall()
        scratch = self.path.with_suffix(".piece.tmp")
        scratch.write_text(json.dumps({"commit": self.commit, "wall_s": wall, "paused_s": self.paused}))
        scratch.replace(self.path)  # never half a record, whenever the kill comes

    def end(self, rc: int) -> None:
        self._done.set()
        self._beat.join()
        record(self.into, self.name, self.commit, "end", self._wall(), rc, self.paused)
        self.path.unlink(missing_ok=True)


def recover(into: Path, name: str) -> None:
    """The end row of a piece of ``name`` that was killed before it could write one, from its last
    heartbeat: its wall time (less pauses) up to then, rc ``killed``."""
    path = into / f"{name}.piece"
    if not path.exists():
        return
    last = json.loads(path.read_text())
    record(into, name, last["commit"], "end", last["wall_s"], "killed", last["paused_s"], when=path.stat().st_mtime)
    path.unlink()


def rows(into: Path) -> list[dict[str, str]]:
    """The rows of ``<into>/times.tsv`` by column (a row written before ``paused_s`` lacks it)."""
    path = into / TIMES
    if not path.exists():
        return []
    return [dict(zip(COLUMNS, line.split("\t"))) for line in path.read_text().splitlines()[1:]]


def walls(into: Path) -> dict[str, float]:
    """Per name, the wall seconds of its pieces (pauses left out; a killed piece up to its last heartbeat), summed."""
    totals: dict[str, float] = {}
    for entry in rows(into):
        if entry["event"] == "end" and entry["wall_s"]:
            totals[entry["name"]] = totals.get(entry["name"], 0.0) + float(entry["wall_s"])
    return totals


def snakemake(clone: Path, config: str, cores: int, *targets: str, log: Path) -> int:
    """``snakemake`` in ``clone`` with this Python's environment (its jobs find the same venv), its
    output appended to ``log``; the exit status. A run cut short leaves its lock behind: unlocked first."""
    base = [sys.executable, "-m", "snakemake"]
    config_args = ["--configfile", config] if config else []
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    with log.open("a") as out:
        subprocess.run([*base, "--unlock", *config_args], cwd=clone, stdout=out, stderr=out, env=env)
        # the targets before --configfile, which takes every word after it
        command = [*base, "--cores", str(cores), "--rerun-incomplete", *targets, *config_args]
        return subprocess.run(command, cwd=clone, stdout=out, stderr=out, env=env).returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commit", required=True)
    parser.add_argument("--into", required=True, type=Path, help="a folder for the clones and times.tsv")
    parser.add_argument("--cores", type=int, default=os.cpu_count())
    parser.add_argument("--source", type=Path, default=REPO, help="the repository to clone")
    parser.add_argument("--no-cost", action="store_true", help="skip cost_estimate and cost_check")
    parser.add_argument("runs", nargs="+", metavar="NAME=CONFIG")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    runs = [run.split("=", 1) for run in args.runs]
    if any(len(run) != 2 or not run[0] for run in runs):
        parser.error("each run is NAME=CONFIG (CONFIG empty for config.yaml)")
    args.into.mkdir(parents=True, exist_ok=True)
    for name, config in runs:
        clone = (args.into / name).resolve()
        commit = clone_at(args.source, args.commit, clone)
        packages = args.source / "resources" / "packages"
        if packages.is_dir() and not (clone / "resources" / "packages").exists():
            shutil.copytree(packages, clone / "resources" / "packages")
        log = args.into / f"{name}.log"
        piece, rc = Piece(args.into, name, commit).begin(), 143
        try:
            rc = snakemake(clone, config, args.cores, log=log)
        finally:  # a piece cut short (SIGTERM at a session's end) still counts its time
            piece.end(rc)
        if rc != 0:
            raise SystemExit(f"{name}: snakemake exited {rc}; its output: {log}")
        if not args.no_cost:
            snakemake(clone, config, args.cores, "cost_estimate", log=log)
            check = subprocess.run(
                [sys.executable, "benchmarks/cost_check.py", "--markdown"], cwd=clone, capture_output=True, text=True
            )
            (args.into / f"{name}.cost.md").write_text(check.stdout)
    for name, seconds in walls(args.into).items():
        print(f"{name}: {seconds / 60:.1f} min of wall on {machine()}, {args.cores} cores")


if __name__ == "__main__":
    main()
