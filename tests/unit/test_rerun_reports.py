"""benchmarks/rerun_reports.py: clean clones of one commit (and a refusal to reuse one that is not),
the times record whose pieces sum to a run's wall time, and a whole rerun of a one-rule workflow
made here, through the real snakemake."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests import benchmark_scripts


def _rerun():
    return benchmark_scripts.load("rerun_reports")


def _git(folder, *words):
    return subprocess.run(["git", "-C", str(folder), *words], check=True, capture_output=True, text=True).stdout.strip()


def _repository(repo, shells):
    """A repository at ``repo`` of one commit per shell command: a Snakefile whose one rule runs it to
    write done.txt."""
    repo.mkdir()
    _git(repo, "init", "--quiet")
    for shell in shells:
        (repo / "Snakefile").write_text(f'rule all:\n    output: "done.txt"\n    shell: "{shell}"\n')
        _git(repo, "add", "Snakefile")
        _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", shell)
    return repo


@pytest.fixture
def source(tmp_path):
    """A repository of two commits: a Snakefile whose one rule writes the commit's word to done.txt."""
    return _repository(tmp_path / "source", [f"echo {word} > {{output}}" for word in ("first", "second")])


def test_a_clone_is_made_at_the_commit_and_reused_only_there_and_clean(source, tmp_path):
    rerun = _rerun()
    first = _git(source, "rev-parse", "HEAD~1")
    dest = tmp_path / "clones" / "a"
    assert rerun.clone_at(source, first[:7], dest) == first
    assert _git(dest, "rev-parse", "HEAD") == first
    assert rerun.clone_at(source, first, dest) == first  # reused
    with pytest.raises(SystemExit, match="is at"):
        rerun.clone_at(source, _git(source, "rev-parse", "HEAD"), dest)
    with pytest.raises(SystemExit, match="is at"):
        rerun.clone_at(source, "0" * 40, dest)  # a commit the clone does not have
    (dest / "reports").mkdir()
    (dest / "reports" / "summary.md").write_text("a finished run's report\n")
    _git(dest, "add", "reports")  # tracked, as the shipped reports are: a run's output, not a change
    assert rerun.clone_at(source, first, dest) == first
    (dest / "Snakefile").write_text("changed\n")
    with pytest.raises(SystemExit, match="changes of its own"):
        rerun.clone_at(source, first, dest)


def test_the_wall_time_of_a_run_in_pieces_is_their_sum(tmp_path):
    rerun = _rerun()
    rerun.record(tmp_path, "smollm2", "a" * 40, "start")
    rerun.record(tmp_path, "smollm2", "a" * 40, "end", 100.4, 143)  # cut short
    rerun.record(tmp_path, "default", "a" * 40, "start")
    rerun.record(tmp_path, "default", "a" * 40, "end", 30.0, 0)
    rerun.record(tmp_path, "smollm2", "a" * 40, "start")
    rerun.record(tmp_path, "smollm2", "a" * 40, "end", 50.0, 0)
    lines = (tmp_path / "times.tsv").read_text().splitlines()
    assert lines[0].split("\t") == list(rerun.COLUMNS)
    assert lines[2].split("\t")[:2] == ["smollm2", "a" * 10] and _rows(tmp_path)[1]["rc"] == "143"
    assert rerun.walls(tmp_path) == {"smollm2": 150.0, "default": 30.0}


def _rows(into):
    return _rerun().rows(into)


def test_a_rerun_runs_the_workflow_of_the_commit_in_its_own_clone(source, tmp_path):
    first = _git(source, "rev-parse", "HEAD~1")
    into = tmp_path / "reruns"
    script = benchmark_scripts.BENCHMARKS / "rerun_reports.py"
    command = [sys.executable, str(script), "--commit", first, "--into", str(into), "--cores", "1", "--no-cost"]
    result = subprocess.run([*command, "--source", str(source), "one="], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert (into / "one" / "done.txt").read_text() == "first\n"  # the commit's workflow, not the newest
    rows = _rows(into)
    assert [r["event"] for r in rows] == ["start", "end"] and rows[1]["rc"] == "0" and rows[1]["paused_s"] == "0"
    assert not (into / "one.piece").exists()  # a piece that ended leaves no heartbeat behind
    assert "one:" in result.stdout and "min of wall" in result.stdout
    # a bad run names itself
    bad = subprocess.run([*command, "--source", str(source), "=x"], capture_output=True, text=True)
    assert bad.returncode != 0 and "NAME=CONFIG" in bad.stderr


def test_the_host_is_named_with_its_cpu_and_widest_vector_instructions(tmp_path, monkeypatch):
    """Two hosts of one name ran the SmolLM2 protocol with AVX-512 and without it, and finetuned
    AGNews differently: the record tells them apart."""
    rerun = _rerun()
    monkeypatch.setattr(rerun.socket, "gethostname", lambda: "vm")
    cpuinfo = tmp_path / "cpuinfo"
    for flags, shown in (
        ("fpu sse2 avx avx2 avx512f avx512bw", "vm (Some CPU, AVX-512)"),
        ("sse2 avx avx2", "vm (Some CPU, AVX2)"),
        ("sse2", "vm (Some CPU)"),
    ):
        cpuinfo.write_text(f"processor\t: 0\nmodel name\t: Some CPU\nflags\t\t: {flags}\n\nprocessor\t: 1\n")
        assert rerun.machine(cpuinfo) == shown
    assert rerun.machine(tmp_path / "absent").startswith("vm (")
    rerun.record(tmp_path, "one", "a" * 40, "start")
    host = (tmp_path / "times.tsv").read_text().splitlines()[1].split("\t")[2]
    assert host == rerun.machine() and "\t" not in host


def _wait_for(condition, seconds=60.0):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_a_pause_is_left_out_of_the_wall_time_and_a_killed_piece_still_counts(tmp_path):
    """A run killed without a word (SIGKILL, as a session's end does) gets its end row from its last
    heartbeat when called again; a SIGSTOP of the process group, 5 s, is counted as paused."""
    repo = _repository(tmp_path / "source", ["sleep 3 && echo done > {output}"])
    into = tmp_path / "reruns"
    script = benchmark_scripts.BENCHMARKS / "rerun_reports.py"
    command = [sys.executable, str(script), "--commit", "HEAD", "--into", str(into), "--cores", "1", "--no-cost"]
    command += ["--source", str(repo), "one="]

    def starts():
        return (into / "times.tsv").exists() and sum(r["event"] == "start" for r in _rows(into))

    first = subprocess.Popen(command, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_for(lambda: starts() == 1 and (into / "one.piece").exists())
    time.sleep(2.5)  # two heartbeats at least
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    assert [r["event"] for r in _rows(into)] == ["start"]  # no end row: it was killed

    second = subprocess.Popen(command, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _wait_for(lambda: starts() == 2)
    os.killpg(second.pid, signal.SIGSTOP)
    time.sleep(5)
    os.killpg(second.pid, signal.SIGCONT)
    assert second.wait(timeout=120) == 0, second.stderr.read()
    rows = _rows(into)
    assert [r["event"] for r in rows] == ["start", "end", "start", "end"]
    killed, done = rows[1], rows[3]
    assert killed["rc"] == "killed" and float(killed["wall_s"]) >= 1 and killed["paused_s"] == "0"
    assert done["rc"] == "0" and float(done["paused_s"]) >= 3.5, done  # a heartbeat may fall 1 s into it
    assert float(done["wall_s"]) >= 3  # the rule's sleep, not the pause
    assert (into / "one" / "done.txt").read_text() == "done\n"
