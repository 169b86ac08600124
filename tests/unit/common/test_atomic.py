"""One atomic writer for every output: a plain open()'s permissions, nothing left on a failure."""

import os
import stat

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from icl_gd.common import atomic, frames
from icl_gd.metrics import comparisons
from icl_gd.report import figures, render


@pytest.fixture(params=[0o022, 0o027], ids=["umask022", "umask027"])
def umask(request):
    """A umask other than the machine's default too, so that a hard-coded mode would show."""
    old = os.umask(request.param)
    yield request.param
    os.umask(old)


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def table_frame() -> pd.DataFrame:
    frame = pd.DataFrame({"SST2": ["0.12 ± 0.01"], "CB": ["—"]}, index=pd.Index(["SimAOU"], name="Metric"))
    frame.attrs.update(best=[], footnotes=[])
    return frame


def test_every_writer_gives_a_plain_opens_permissions(tmp_path, umask):
    expected = 0o666 & ~umask
    plain = tmp_path / "plain"
    with open(plain, "w"):
        pass
    assert mode(plain) == expected

    written = [tmp_path / "frame.parquet", tmp_path / "text.txt"]
    frames.atomic_write_frame(pd.DataFrame({"a": [1, 2]}), written[0])
    atomic.write_text(written[1], "x\n")
    written += render.write_table_files(table_frame(), tmp_path / "tables" / "t")  # .md, .tex, .csv
    fig, ax = plt.subplots()
    ax.plot([0, 1])
    written += figures.write_figure(fig, tmp_path / "figures" / "f")  # .png, .pdf
    rows = [
        dict(
            model="m",
            variant="trained",
            task="t",
            method="gd",
            baseline="gd",
            metric="acc_ft",
            mean_method=0.5,
            mean_baseline=0.5,
            diff=0.0,
            ci_low=0.0,
            ci_high=0.0,
            p_value=1.0,
            significant=False,
            n_examples=3,
            n_seeds=1,
        )
    ]
    with pytest.MonkeyPatch.context() as mp:  # the comparisons' CSV, without computing any
        mp.setattr(comparisons, "compare_methods", lambda examples, baseline, **kw: pd.DataFrame(rows))
        comparisons.write_comparisons([], tmp_path / "c.parquet", tmp_path / "c.csv", None)
    written += [tmp_path / "c.parquet", tmp_path / "c.csv"]

    assert {p: oct(mode(p)) for p in written} == {p: oct(expected) for p in written}
    leftovers = [p for p in tmp_path.rglob("*") if p.is_file() and p not in written and p != plain]
    assert leftovers == []


def test_a_failed_write_leaves_neither_target_nor_temporary(tmp_path):
    target = tmp_path / "out" / "table.csv"
    with pytest.raises(RuntimeError, match="killed"):
        with atomic.atomic_path(target) as tmp:
            tmp.write_text("half a ta")
            raise RuntimeError("killed")
    assert list((tmp_path / "out").iterdir()) == []


def test_a_failed_write_keeps_the_previous_file(tmp_path):
    target = tmp_path / "summary.txt"
    atomic.write_text(target, "before\n")
    with pytest.raises(KeyboardInterrupt):
        with atomic.atomic_path(target) as tmp:
            tmp.write_text("after, half")
            raise KeyboardInterrupt
    assert target.read_text() == "before\n" and list(tmp_path.iterdir()) == [target]


def test_a_failing_figure_leaves_no_file(tmp_path, monkeypatch):
    fig, ax = plt.subplots()
    ax.plot(np.arange(3))

    def fail(self, fname, **kwargs):
        with open(fname, "wb") as fh:
            fh.write(b"\x89PNG half")
        raise OSError("disk full")

    monkeypatch.setattr(type(fig), "savefig", fail)
    with pytest.raises(OSError, match="disk full"):
        figures.write_figure(fig, tmp_path / "per_layer")
    assert list(tmp_path.iterdir()) == []


def test_the_temporary_file_sits_beside_the_target_and_is_renamed(tmp_path):
    target = tmp_path / "deep" / "er" / "x.md"
    with atomic.atomic_path(target) as tmp:
        # same folder: the rename cannot cross a file system; hidden: no glob picks it up
        assert tmp.parent == target.parent and tmp.name.startswith(".x.md.") and tmp.exists()
        assert not target.exists()
        tmp.write_text("done")
    assert target.read_text() == "done" and not tmp.exists()
    assert [p.name for p in target.parent.iterdir()] == ["x.md"]


def test_a_writer_killed_outright_leaves_a_temporary_that_the_next_write_removes(tmp_path):
    """SIGKILL runs no ``finally``: the killed writer's temporary stays until the target is
    written again (or a job that writes it starts, ``runtime.log_to``), and is never taken for it."""
    import signal
    import subprocess
    import sys

    target = tmp_path / "figures" / "grad_norms.png"
    code = (
        "import os, signal\n"
        "from icl_gd.common import atomic\n"
        f"with atomic.atomic_path({str(target)!r}) as tmp:\n"
        "    tmp.write_bytes(b'half a figure')\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code])
    assert proc.returncode == -signal.SIGKILL
    (left,) = target.parent.iterdir()
    assert left.name.startswith(".grad_norms.png.") and left.name.endswith(".tmp") and not target.exists()
    other = target.with_name(".grad_norms.png.notatoken.tmp")  # not a name the writer makes: kept
    other.write_text("")
    atomic.write_text(target, "whole")
    assert sorted(p.name for p in target.parent.iterdir()) == sorted([target.name, other.name])
    assert target.read_text() == "whole"


def test_remove_stale_takes_only_the_named_outputs_temporaries(tmp_path):
    mine, theirs = tmp_path / "a.parquet", tmp_path / "b.parquet"
    stale = [tmp_path / ".a.parquet.0123abcd.tmp", tmp_path / ".a.parquet.ffffffff.tmp"]
    kept = [tmp_path / ".b.parquet.0123abcd.tmp", tmp_path / "a.parquet.0123abcd.tmp", mine]
    for path in stale + kept:
        path.write_text("")
    assert sorted(atomic.remove_stale(mine, theirs.with_name("absent"), tmp_path / "no" / "folder")) == sorted(stale)
    assert sorted(tmp_path.iterdir()) == sorted(kept)
