"""The calibration: this machine's rates, timed (``calibrate``), and a job's cost at them
(``predict``).

For each model and path, the real extraction code on the config's first task and seed, run in a
forked copy of this process at two sizes of the evaluation set (``max_eval``), from which a job's
fixed time (loading the model, tokenizer and data, writing the cache) and its time per FLOP follow,
and the forked copy's peak resident set. The runs share the machine as the run's jobs will: as many
side by side as the run runs at once (``copies``), the longest first, and a filler in a slot that
no run can take yet, so that none is timed on an emptier machine than the run's (and the
calibration takes about its runs' time over ``copies``). A training path is run at the larger size
and its training time is what remains after ZSL's evaluation at that size (of two methods of a
kind, the ones with the fewest and the most demonstrations: the training's fixed part apart from
its time per FLOP). Where a path's run takes under 5 s (its fixed part much of its time), ICL and a
kind whose methods all have one number of demonstrations are also run on the task with the longest
prompts (with its ZSL), and each path's line fitted through all its points. The built-in model's
pretraining is timed the same way, a few steps of its own loop (``PRETRAIN_STEPS``), where its
build will train (not where it copies shipped weights: ``build_cost``). A job's start
adds the warm worker's hand-over (local runs) or the imports of torch and transformers (every SLURM
job, a local run without the worker), measured once.

Memory: the calibration run's peak resident set of the job's path, plus the difference in
activations between the job and the calibration run (``devices.activation_mb``: the batch's
longest sequence, the ICL prefix's keys and values), never less than the calibration run's.

Everything here that forks, waits and times is apart from the estimate (``cost``), which only
reads the rates: an estimate on a named device (``devices``) never calibrates.
"""

from __future__ import annotations

import os
import signal
import statistics
import time
from dataclasses import dataclass, field

import pandas as pd

from icl_gd.activations.work import (
    DEMO_TOKENS,
    PRETRAIN_BATCH,
    Shape,
    Work,
    job_work,
    pretrain_length,
    pretrain_spec_work,
)
from icl_gd.common import warm as worker
from icl_gd.planning import plan
from icl_gd.planning.devices import activation_mb

PRETRAIN_STEPS = (5, 25)  # the built-in model's pretraining is timed at these many steps
SHORT_S = 5.0  # a run shorter than this is timed thrice; its training apart on a second task

# ------------------------------------------------------------------------------------------------
# Rates, and a job's cost at them


@dataclass
class PathRate:
    """A path's measured cost on one model: fixed seconds, seconds per GFLOP, peak MB, and the
    work of the calibration run the peak was measured on. A training method's: its training's
    alone (its evaluation is ZSL's)."""

    fixed_s: float
    s_per_gflop: float
    peak_mb: float
    work: Work


@dataclass
class Calibration:
    """Per model, per path; and a job's start (warm: the worker's hand-over; cold: the imports)."""

    paths: dict[str, dict[str, PathRate]] = field(default_factory=dict)
    start_s: float = 0.0
    seconds: float = 0.0  # what the calibration itself took


def predict(shape: Shape, work: Work, rate: PathRate, start_s: float, batch_size: int, train_rate=None) -> tuple:
    """(seconds, peak MB) of a job."""
    seconds = start_s + rate.fixed_s + work.eval_flops / 1e9 * rate.s_per_gflop
    if work.train_flops:
        seconds += work.train_flops / 1e9 * (train_rate if train_rate is not None else rate.s_per_gflop)
    grow = activation_mb(shape, work, batch_size) - activation_mb(shape, rate.work, batch_size)
    return seconds, rate.peak_mb + max(grow, 0.0)


# ------------------------------------------------------------------------------------------------
# Measuring


def _fork(fn) -> int:
    """``fn`` in a forked copy of this process (which starts from this process's memory, as a
    warm-worker job does); its pid. The copy exits 1 where ``fn`` raised, its traceback printed."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            fn()
            code = 0
        except BaseException:
            import traceback

            traceback.print_exc()
        finally:
            os._exit(code)
    return pid


def time_side_by_side(runs: dict, slots: int = 1, filler=None, short_s: float = SHORT_S) -> dict:
    """Each of ``runs`` ({key: (function, the key of a run it must follow, or None)}) in a forked
    copy of this process, ``slots`` copies at a time, as a local run's jobs share the machine:
    {key: (seconds, the copy's peak resident set in MB)}. Runs start in the order given, each once
    the run it follows has finished; a run shorter than ``short_s`` is run thrice and its median
    kept (a run of a second moves by tens of percent with whatever else the machine does). While
    a run is still timed and no other can start, ``filler`` runs in the free slots (killed when it
    is no longer needed), so that no run is timed on a machine emptier than the run's."""
    pending, done = list(runs), set()
    times: dict = {key: [] for key in runs}
    running: dict[int, tuple] = {}  # pid: (key, or None for a filler; its start)

    def ready():
        return next((key for key in pending if runs[key][1] is None or runs[key][1] in done), None)

    def stop(pid):
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        del running[pid]

    try:
        while pending or any(key is not None for key, _ in running.values()):
            while (key := ready()) is not None:
                if len(running) >= slots:
                    fillers = [pid for pid, (k, _) in running.items() if k is None]
                    if not fillers:
                        break
                    stop(fillers[0])
                pending.remove(key)
                running[_fork(runs[key][0])] = (key, time.perf_counter())
            timed = any(key is not None for key, _ in running.values())
            while filler is not None and timed and len(running) < slots:
                running[_fork(filler)] = (None, time.perf_counter())
            if not running:
                raise ValueError(f"calibration runs follow runs that are not among them: {pending}")
            pid, status, usage = os.wait4(-1, 0)
            if pid not in running:  # not one of ours
                continue
            key, start = running.pop(pid)
            if key is None:
                continue
            if os.waitstatus_to_exitcode(status) != 0:
                raise RuntimeError(f"a calibration run failed ({key}; its traceback is above)")
            times[key].append((time.perf_counter() - start, usage.ru_maxrss / 1024))
            done.add(key)  # its cache is there for the runs that follow it
            if len(times[key]) == 1 and times[key][0][0] < short_s:
                pending[:0] = [key, key]
    finally:
        for pid in list(running):
            stop(pid)
    return {key: (sorted(s for s, _ in t)[len(t) // 2], max(p for _, p in t)) for key, t in times.items()}


def repeated(one_pass, until: float) -> tuple[dict, int]:
    """``one_pass()`` ({key: (seconds, peak MB)}) called again until ``time.perf_counter()`` has
    passed ``until`` (at least once): each key's median seconds and largest peak, and how many
    passes it took."""
    samples: dict = {}
    passes = 0
    while passes == 0 or time.perf_counter() < until:
        for key, value in one_pass().items():
            samples.setdefault(key, []).append(value)
        passes += 1
    return {key: (statistics.median(s for s, _ in t), max(p for _, p in t)) for key, t in samples.items()}, passes


def sizes(n_eval: int) -> tuple[int, int]:
    """The two evaluation sizes a path is calibrated at: a quarter and all of at most 64."""
    large = max(2, min(64, n_eval))
    return max(1, large // 4), large


# ------------------------------------------------------------------------------------------------
# The calibration


def start_seconds(warm: bool) -> float:
    """A job's start before its script's first line: a bare Python (the warm worker's client,
    whose job is forked with everything imported), or Python importing torch and transformers."""
    import subprocess
    import sys

    code = "import sys" if warm else "import torch, transformers; from transformers import AutoModelForCausalLM"
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    return time.perf_counter() - start


def _line(points: list[tuple[float, float]]) -> tuple[float, float]:
    """(fixed seconds, seconds per GFLOP): the least-squares line through (GFLOP, seconds) points
    (through two, the line through both); a non-positive slope (noise on a job too small to time)
    puts the whole time in the fixed part."""
    xs, ys = [x for x, _ in points], [y for _, y in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    spread = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in points) / spread if spread else 0.0
    if slope <= 0:
        return max(ys), 0.0
    return max(my - mx * slope, 0.0), slope


def calibrate(
    config: dict,
    shapes: dict[str, Shape],
    sequences,
    model_dirs: dict[str, str],
    task_files: dict[str, dict[str, str]],
    workdir: str,
    *,
    warm: bool = True,
    threads: int = 1,
    copies: int = 1,
    min_seconds: float = 0.0,
    copied=(),
    log=print,
) -> Calibration:
    """Each model's paths timed on this machine (see the module's docstring): the config's first
    task and seed, in forked copies of this process, the caches written under ``workdir``.
    ``copies``: how many jobs the run will run at once here (the calibration runs as many side by
    side: two jobs on two cores each take longer than one alone). ``min_seconds``: the runs are
    timed again, pass after pass, until this long has gone by, and each run's median kept.
    ``copied``: built-in models whose build copies shipped weights (``build_cost.shipped_copies``):
    their pretraining, which will not run, is not timed."""
    import torch

    from icl_gd.activations import extract
    from icl_gd.config import resolve as cfg
    from icl_gd.data import splits

    began = time.perf_counter()
    if not os.environ.get(worker.CHILD_ENV):  # as the warm worker would have: its forks find them loaded
        worker.preload(list(worker.DEFAULT_PRELOAD))
    task = next(iter(config["tasks"]))
    methods = [m for methods in config["variants"].values() for m in methods]
    # each kind's methods (those that run on the task, where any does) with the fewest and the most
    # demonstrations, where these differ; else its first
    by_kind: dict[str, list[str]] = {}
    for method in sorted(dict.fromkeys(methods), key=lambda m: cfg.setting_k(config, m)):
        by_kind.setdefault(cfg.method_spec(config, method)["kind"], []).append(method)
    by_kind = {kind: [m for m in ms if cfg.method_runs_on(config, m, task)] or ms for kind, ms in by_kind.items()}
    by_kind = {
        kind: [ms[0], ms[-1]] if cfg.setting_k(config, ms[0]) != cfg.setting_k(config, ms[-1]) else [ms[0]]
        for kind, ms in by_kind.items()
    }
    icl = cfg.icl_setting(config, methods[0]) if methods else "icl"
    n_eval = len(splits.select_eval(pd.read_parquet(task_files[task]["eval"]), config["max_eval"]))
    small, large = sizes(n_eval)

    # every model's runs, planned first and timed together: (model, setting, examples) -> its work
    runs, works, filler = {}, {}, None

    def path(key):
        return os.path.join(workdir, "{}-{}-{}-{}.arrow".format(*key))

    # ICL, and a training kind whose methods all have one number of demonstrations, also on a
    # second task, that with the longest prompts: its points lie farther apart than two sizes of one
    # task's evaluation set, which tells a fixed part from a time per FLOP (ZSL's too, with its run)
    second: dict[tuple, tuple] = {}  # (model, setting): the key of its run there
    others = [t for t in config["tasks"] if t != task]

    for model, folder in model_dirs.items():

        def job(setting, n, out, reference=None, model=model, folder=folder, task=task):
            spec = {**plan.run_spec(config, task, setting, cfg.task_seeds(config, task)[0], model=model), "max_eval": n}
            if spec.get("lr", 0.0) is None:  # a method that chooses its rate: timed at its grid's first
                spec["lr"] = cfg.choice_grid(config, setting)["lr"][0]

            def run():  # copies side by side may write the same files: each atomically, all alike
                torch.set_num_threads(threads)
                extract.run(
                    spec,
                    model_name=model,
                    variant="trained",
                    model_dir=folder,
                    train_path=task_files[task]["train"],
                    eval_path=task_files[task]["eval"],
                    out_path=out,
                    train_log_path=out.replace(".arrow", ".parquet"),
                    reference_path=reference,
                    device=config["device"],
                    batch_size=config["batch_size"],
                )

            return run, job_work(shapes[model], spec, sequences(model, spec))

        def add(setting, n, after=None, model=model, job=job, task=task):
            key = (model, task, setting, n)
            run, works[key] = job(setting, n, path(key), path(after) if after else None, task=task)
            runs[key] = (run, after)
            return key

        zsl = [add("zsl", n) for n in (large, small)]  # first: the others read their caches
        if filler is None:  # the first model's smaller ZSL run, into a file of its own
            filler = job("zsl", small, os.path.join(workdir, f"{model}-filler.arrow"))[0]
        for method in [m for chosen in by_kind.values() for m in chosen]:
            add(method, large, zsl[0])
        if cfg.is_icl_setting(icl):
            for n in (large, small):
                add(icl, n, zsl[0] if n == large else zsl[1])
        single = [chosen[0] for chosen in by_kind.values() if len(chosen) == 1]
        for setting in single + ([icl] if cfg.is_icl_setting(icl) else []):
            there = [t for t in others if setting == icl or cfg.method_runs_on(config, setting, t)]
            if there:
                longest = max(there, key=lambda t: job(setting, large, "", task=t)[1].flops)
                reference = (model, longest, "zsl", large)
                if reference not in runs:
                    add("zsl", large, task=longest)
                second[model, setting] = add(setting, large, reference, task=longest)
    # The longest first among those that may start (a short run at the end keeps the tail short).
    # The second task's runs only where the first task's run is short (under 5 s): there the fixed
    # part is much of a job's time, while a longer run is mostly its FLOPs (docs/performance.md).
    extra = set(second.values()) | {runs[key][1] for key in second.values()}
    first = [key for key in runs if runs[key][1] is None and key not in extra]
    order = first + sorted(
        (key for key in runs if key not in first and key not in extra), key=lambda key: -works[key].flops
    )
    pretraining = {
        model: _pretraining_runs(model_dirs[model], shapes[model], spec)
        for model, spec in config["models"].items()
        if model in model_dirs and spec["source"] == "builtin" and spec.get("pretrain_steps") and model not in copied
    }

    # Passes of every run until ``min_seconds`` have gone by, each run's median kept: a host's speed
    # drifts in phases of 10-20 s (measured: docs/performance.md), and a calibration of a few
    # seconds would take one phase for the machine's rate. The pretraining, one job, runs alone.
    def one_pass():
        timed = time_side_by_side({key: runs[key] for key in order}, copies, filler=filler)
        if not wanted and second:  # the first pass: which paths' runs are short
            wanted.extend(
                key for (model, setting), key in second.items() if timed[model, task, setting, large][0] < SHORT_S
            )
            wanted[:0] = dict.fromkeys(runs[key][1] for key in wanted)  # their references first
            second.clear()
        if wanted:
            timed.update(time_side_by_side({key: runs[key] for key in wanted}, copies, filler=filler))
        for model, jobs in pretraining.items():
            timed.update({(model, steps): t for steps, t in time_side_by_side(jobs).items()})
        return timed

    wanted: list = []
    timed, passes = repeated(one_pass, until=began + min_seconds)
    log(f"calibration: {passes} passes of every run in {time.perf_counter() - began:.0f} s")
    for key in order + wanted:
        seconds, peak = timed[key]
        log(
            f"calibration {key[0]} {key[1]} {key[2]} ({key[3]} examples): {seconds:.2f} s, {peak:,.0f} MB, {works[key].flops / 1e9:,.2f} GFLOP"
        )

    calibration = Calibration(start_s=start_seconds(warm))
    for model, folder in model_dirs.items():
        rates: dict[str, PathRate] = {}

        def fit(setting):
            keys = [(model, task, setting, n) for n in (small, large)]
            keys += [key for key in wanted if key[0] == model and key[2] == setting]
            points = [(works[key].flops / 1e9, timed[key][0]) for key in keys]
            # memory: the largest run's peak, and a job's growth counted from that run's work
            largest = max(keys, key=lambda key: timed[key][1])
            return PathRate(*_line(points), timed[largest][1], works[largest])

        rates["zsl"] = fit("zsl")
        if cfg.is_icl_setting(icl):
            rates["icl"] = fit(icl)
        for kind, chosen in by_kind.items():
            # the training's time: what is left of the run after ZSL's evaluation of its examples;
            # with two numbers of demonstrations, its fixed part (master weights, the first step's
            # allocations) apart from its time per GFLOP. On the larger evaluation set: what a
            # method's evaluation costs beyond ZSL's (a linearized model's, three passes) counts as
            # training here, and so is counted for that many examples, close to the jobs' own
            points, peaks = [], []
            keys = [(model, task, method, large) for method in chosen]
            keys += [key for key in wanted if key[0] == model and key[2] in chosen]
            for key in keys:
                work, (seconds, peak) = works[key], timed[key]
                evaluation = rates["zsl"].fixed_s + work.eval_flops / 1e9 * rates["zsl"].s_per_gflop
                points.append((work.train_flops / 1e9, max(seconds - evaluation, 0.0)))
                peaks.append((peak, work))
            if len(points) >= 2:
                fixed, slope = _line(points)
            else:
                fixed, slope = 0.0, points[0][1] / points[0][0] if points[0][0] else 0.0
            peak, work = max(peaks, key=lambda p: p[0])
            rates[kind] = PathRate(fixed, slope, peak, work)
        if model in pretraining:
            rates["pretrain"] = _pretraining_rate(shapes[model], config["models"][model], timed, model, log)
        for path, rate in rates.items():
            log(
                f"rate {model} {path}: {rate.fixed_s:.3f} s a job + {rate.s_per_gflop:.4f} s/GFLOP, peak {rate.peak_mb:,.0f} MB"
            )
        calibration.paths[model] = rates
    calibration.seconds = time.perf_counter() - began
    return calibration


def _pretraining_runs(folder: str, shape: Shape, spec: dict) -> dict:
    """The built-in model's pretraining, a few steps of its own loop at its length: {steps: run}."""
    import torch

    from icl_gd.models import loading, pretraining
    from icl_gd.models.episodes import Episode

    length, batch = pretrain_length(spec), spec.get("pretrain_batch", PRETRAIN_BATCH)
    loss = spec.get("pretrain_loss", "tokens")

    def job(steps):
        def run():
            torch.set_num_threads(2)  # the rule's threads
            model = loading.load_model(folder, device="cpu")
            gen = torch.Generator().manual_seed(0)
            ids = torch.randint(4, shape.vocab, (batch, length), generator=gen).tolist()
            # a label word about every demonstration's length, as in an episode
            told = list(range(0, length - 1, DEMO_TOKENS))
            episodes = [Episode(seq, told, told) for seq in ids]
            pretraining.pretrain(model, lambda step: episodes, steps=steps, lr=1e-3, seed=0, loss=loss)

        return run, None

    return {steps: job(steps) for steps in PRETRAIN_STEPS}


def _pretraining_rate(shape: Shape, spec: dict, timed: dict, model: str, log) -> PathRate:
    points = []
    for steps in PRETRAIN_STEPS:
        seconds, rss = timed[model, steps]
        points.append((pretrain_spec_work(shape, spec, steps).flops / 1e9, seconds))
        log(f"calibration pretraining ({steps} steps): {seconds:.2f} s, {rss:,.0f} MB")
    fixed, slope = _line(points)
    peak = max(timed[model, steps][1] for steps in PRETRAIN_STEPS)
    return PathRate(fixed, slope, peak, pretrain_spec_work(shape, spec, PRETRAIN_STEPS[-1]))
