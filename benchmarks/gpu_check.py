"""The Python half of benchmarks/gpu_check.sh: the wheel list's checks, the device's name for the
cost estimate, the grid's failed jobs, and the summary. Standard library only (``packaging`` for
the requirement checks), so that it runs before, and without, anything the wheels install.

    python benchmarks/gpu_check.py verify --wheels .whl          # here, after --download
    python benchmarks/gpu_check.py deps                           # there, after the install
    python benchmarks/gpu_check.py cost-device "NVIDIA H200"      # H200 where the schema has it, else H100
    python benchmarks/gpu_check.py failed --log grid.txt --workdir RUN --before EPOCH
    python benchmarks/gpu_check.py summary --out OUT --scratch SCRATCH
"""

from __future__ import annotations

import argparse
import csv
import datetime
import re
import shutil
import statistics
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WHEELS = REPO / "benchmarks/gpu_wheels.txt"
# The packages of the GPU machines' image ('cuda'), as /work/.library/device/KINDS.md listed them
# on 2026-11-17 (names only; python3 there is Python 3.12.3 with torch 2.11.0 and transformers 5.17.0).
IMAGE = """absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch
build certifi charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-bindings
cuda-core cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops equinox etils execnet
filelock flatbuffers flax fonttools formulaic frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore
httpx huggingface-hub humanize hypothesis idna imageio iniconfig interface-meta jax jax-cuda13-pjrt
jax-cuda13-plugin jaxlib jaxtyping jinja2 joblib kiwisolver lazy-loader lightning lightning-utilities
linear-operator lineax llvmlite lxml markdown markdown-it-py markupsafe matplotlib mdurl meson ml-dtypes
mpi4py mpmath msgpack multidict multipledispatch mypy-extensions nanobind narwhals networkx ninja numba
numba-cuda numpy numpyro nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc nvidia-cuda-runtime
nvidia-cudnn-cu13 nvidia-cufft nvidia-cufile nvidia-curand nvidia-cusolver nvidia-cusparse
nvidia-cusparselt-cu13 nvidia-ml-py nvidia-nccl-cu13 nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx
onnx-ir onnxruntime onnxscript opencv-python-headless optax opt-einsum opt-einsum-fx optimistix
orbax-checkpoint packaging pandas pathspec patsy peft pillow pip pluggy portalocker prometheus-client
propcache protobuf psutil pyarrow pybind11 py-cpuinfo pygments pyparsing pyproject-hooks pyre-extensions
pytest pytest-benchmark pytest-cov pytest-mock pytest-timeout pytest-xdist python-dateutil
pytorch-lightning pyyaml regex requests rich sacrebleu safetensors scikit-build-core scikit-image
scikit-learn scipy seaborn sentencepiece sentence-transformers setuptools shellingham simplejson six
sortedcontainers statsmodels sympy tabulate tensorboard tensorboard-data-server tensorstore threadpoolctl
tifffile tiktoken timm tokenizers toolz torch torchaudio torchdiffeq torch-geometric torchmetrics
torchvision tqdm transformers treescope triton typer typing-extensions typing-inspect urllib3 uvloop
wadler-lindig werkzeug wheel wrapt xarray xxhash yarl zipp""".split()
# The project's requirements the check leaves out (gpu_wheels.txt says why).
NOT_CARRIED = {"datasets", "snakemake-executor-plugin-slurm"}
# Where the wheels' markers are evaluated: the GPU machine's Python.
TARGET = {
    "python_version": "3.12",
    "python_full_version": "3.12.3",
    "implementation_name": "cpython",
    "implementation_version": "3.12.3",
    "platform_python_implementation": "CPython",
    "platform_machine": "x86_64",
    "platform_system": "Linux",
    "sys_platform": "linux",
    "os_name": "posix",
    "platform_release": "",
    "platform_version": "",
    "extra": "",
}
KINDS = ("gd", "lcgd", "linearized")


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel_list(path: Path = WHEELS) -> dict[str, tuple[str, bool]]:
    """name -> (version, built here from its sdist)."""
    out = {}
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if not line:
            continue
        spec, *flags = line.split()
        name, _, version = spec.partition("==")
        out[norm(name)] = (version, "build" in flags)
    return out


def project_requirements() -> list[str]:
    import tomllib

    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    return [d for d in deps if norm(re.split(r"[<>=!~;\[ ]", d)[0]) not in NOT_CARRIED]


def unmet(requirements: list[tuple[str, str]], version_of, environment: dict | None) -> tuple[list[str], int]:
    """(requirer, requirement) pairs whose marker holds: which the versions at hand do not meet."""
    from packaging.requirements import Requirement

    problems, checked = [], 0
    for requirer, text in requirements:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate(environment or {"extra": ""}):
            continue
        checked += 1
        found = version_of(norm(req.name))
        if found is None:
            problems.append(f"{requirer} needs {req}: not installed")
        elif found != "image" and req.specifier and not req.specifier.contains(found, prereleases=True):
            problems.append(f"{requirer} needs {req}: {found} is there")
    return problems, checked


def verify(args) -> int:
    """Here: the folder holds each listed wheel once, and nothing else; every requirement of the
    wheels and of the project is met by a listed wheel or named by the image."""
    listed = wheel_list(Path(args.list))
    found: dict[str, list[tuple[str, Path]]] = {}
    requirements = []
    for wheel in sorted(Path(args.wheels).glob("*.whl")):
        with zipfile.ZipFile(wheel) as z:
            meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1)
            msg = Parser().parsestr(z.read(meta).decode())
        name = norm(msg["Name"])
        found.setdefault(name, []).append((msg["Version"], wheel))
        requirements += [(f"{name} {msg['Version']}", r) for r in msg.get_all("Requires-Dist") or []]
    requirements += [("icl-gd", r) for r in project_requirements()]
    problems = []
    for name, (version, _) in listed.items():
        versions = [v for v, _ in found.get(name, [])]
        if versions != [version]:
            problems.append(f"{name}=={version} is listed; the folder has {versions or 'none'}")
    problems += [f"{name} is in the folder but not listed" for name in found if name not in listed]
    image = {norm(n) for n in IMAGE}

    def version_of(name):
        if name in listed:
            return listed[name][0]
        return "image" if name in image else None

    more, checked = unmet(requirements, version_of, TARGET)
    problems += more
    size = sum(w.stat().st_size for ws in found.values() for _, w in ws)
    print(
        f"{sum(len(v) for v in found.values())} wheels, {size / 2**20:.1f} MiB; {checked} requirements "
        f"(of the wheels and the project, for CPython 3.12 on x86-64 Linux): "
        + ("each met by a listed wheel or named by the image" if not problems else f"{len(problems)} problems")
    )
    for p in problems:
        print("  " + p)
    return 1 if problems else 0


def deps(args) -> int:
    """There, after the install: every requirement of the carried wheels and of the project, against
    the versions this Python imports (the carried ones first, on PYTHONPATH)."""
    from importlib import metadata

    requirements = []
    for name in wheel_list():
        try:
            requirements += [(name, r) for r in metadata.distribution(name).requires or []]
        except metadata.PackageNotFoundError:
            requirements.append(("gpu_wheels.txt", name))
    requirements += [("icl-gd", r) for r in project_requirements()]

    def version_of(name):
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    problems, checked = unmet(requirements, version_of, None)
    print(f"{checked} requirements checked: " + ("all met" if not problems else f"{len(problems)} unmet"))
    for p in problems:
        print("  " + p)
    return 1 if problems else 0


def cost_device(args) -> int:
    """The cost_device to name for this GPU: its own where the schema offers it, else H100 (the
    H200's compute peak is the H100's; its memory is larger and faster)."""
    import yaml

    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    choices = schema["properties"]["cost_device"]["enum"]
    want = next((c for c in ("H200", "H100", "A100") if c in args.gpu), "H100")
    if want in choices:
        print(want)
    else:
        print(f"cost_device {want} is not among {choices}: H100's figures", file=sys.stderr)
        print("H100")
    return 0


STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$")


def grid_events(log: str, before: float | None) -> dict:
    """Finished jobs per rule, and the failed ones (an error block before ``before``, epoch s):
    rule, log files, the first error line of the job's log (Snakemake shows failed logs)."""
    finished: dict[str, int] = {}
    failed, stopped = [], []
    when = None
    lines = log.splitlines()
    for i, line in enumerate(lines):
        m = STAMP.match(line.strip())
        if m:
            when = datetime.datetime.strptime(m.group(1), "%a %b %d %H:%M:%S %Y").timestamp()
            continue
        m = re.match(r"Finished jobid: \d+ \(Rule: (\w+)\)", line.strip())
        if m:
            finished[m.group(1)] = finished.get(m.group(1), 0) + 1
            continue
        m = re.match(r"Error in rule (\w+):", line.strip())
        if not m:
            continue
        logs = []
        for follow in lines[i + 1 : i + 15]:
            f = follow.strip()
            if f.startswith("log:"):
                logs = [p.strip() for p in f[4:].split(" (check log")[0].split(",")]
                break
        job = {"rule": m.group(1), "logs": logs}
        (stopped if before is not None and when is not None and when >= before - 1 else failed).append(job)
    return {"finished": finished, "failed": failed, "stopped": stopped}


def first_error(path: Path) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    errors = [line.strip() for line in text if re.match(r"^\w*(Error|Exception)\b.*:", line.strip())]
    return (errors[-1] if errors else (text[-1].strip() if text else "(empty log)"))[:200]


def move_aside(work: Path, record: str) -> None:
    source = work / record
    if source.exists():
        target = work / "results/benchmarks_failed" / Path(record).relative_to("results/benchmarks")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(source, target)


def failed(args) -> int:
    """The grid's failed jobs and those stopped at its limit: their records moved to
    results/benchmarks_failed (as are empty records), so that cost_check and timeline read the
    finished jobs alone; one line per rule, setting and error, and the finished jobs per rule."""
    work = Path(args.workdir)
    events = grid_events(Path(args.log).read_text(errors="replace"), args.before)
    done = sum(events["finished"].values())
    print(f"finished jobs: {done} (" + ", ".join(f"{r} {n}" for r, n in events["finished"].items()) + ")")
    print(f"failed jobs: {len(events['failed'])}; stopped at the time limit: {len(events['stopped'])}")
    by_error: dict[tuple[str, str, str], int] = {}
    for job in events["failed"] + events["stopped"]:
        records = [p for p in job["logs"] if p.startswith("results/benchmarks/")]
        for record in records:
            move_aside(work, record)
        if job in events["stopped"]:
            continue
        texts = [p for p in job["logs"] if not p.startswith("results/benchmarks/")]
        setting = Path(records[0]).stem if records else "-"
        error = first_error(work / texts[0]) if texts else "(no log)"
        by_error[(job["rule"], setting, error)] = by_error.get((job["rule"], setting, error), 0) + 1
    for empty in sorted((work / "results/benchmarks").rglob("*.tsv")):
        if empty.stat().st_size == 0:
            move_aside(work, empty.relative_to(work).as_posix())
    for (rule, setting, error), n in by_error.items():
        print(f"  {n} x {rule} {setting}: {error}")
    return 0


def read_parts(scratch: Path) -> list[dict]:
    path = scratch / "parts.tsv"
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def gpu_samples(path: Path) -> list[tuple[float, float, float]]:
    """(epoch s, utilisation %, memory MiB) from nvidia-smi's csv,noheader,nounits."""
    out = []
    if not path.exists():
        return out
    for row in csv.reader(path.read_text(errors="replace").splitlines()):
        try:
            stamp = datetime.datetime.strptime(row[0].strip(), "%Y/%m/%d %H:%M:%S.%f").timestamp()
            out.append((stamp, float(row[1]), float(row[2])))
        except (ValueError, IndexError):
            continue
    return out


def gpu_during(samples, start: float, end: float) -> str:
    inside = [(u, m) for t, u, m in samples if start <= t <= end]
    if not inside:
        return ""
    util = [u for u, _ in inside]
    return (
        f"GPU utilisation mean {statistics.mean(util):.0f}% (median {statistics.median(util):.0f}%, "
        f"busy >0% in {sum(u > 0 for u in util) / len(util):.0%} of {len(util)} samples), "
        f"memory up to {max(m for _, m in inside):,.0f} MiB"
    )


def tail_error(path: Path, n: int = 3) -> list[str]:
    if not path.exists():
        return ["(no output)"]
    noise = re.compile(r"^(USDT:|\[transformers\])|Warning")
    text = path.read_text(errors="replace").splitlines()
    lines = [line.rstrip() for line in text if line.strip() and not noise.search(line)]
    errors = [line for line in lines if re.search(r"(Error|Exception|error:|No such file|not found)", line)]
    return [line[:240] for line in (errors[-n:] if errors else lines[-n:])] or ["(no output)"]


def summary(args) -> int:
    out, scratch = Path(args.out), Path(args.scratch)
    parts = {p["part"]: p for p in read_parts(scratch)}
    samples = gpu_samples(out / "gpu.csv")
    lines = ["", "=" * 100, "GPU check: summary", "=" * 100]
    env = scratch / "env.txt"
    if env.exists():
        lines += [line for line in env.read_text().splitlines() if line.strip()]

    def head(name: str, title: str) -> dict | None:
        part = parts.get(name)
        if part is None:
            lines.append(f"\n[{title}] not run")
            return None
        status = {"0": "ok"}.get(part["rc"], f"exit {part['rc']}")
        if part["rc"] in ("124", "137"):
            status = f"stopped at its limit of {part['budget']} s"
        if part.get("note"):
            status += f"; {part['note']}"
        seconds = float(part["end"]) - float(part["start"])
        lines.append(f"\n[{title}] {seconds:.0f} s (budget {part['budget']} s), {status}")
        gpu = gpu_during(samples, float(part["start"]), float(part["end"]))
        if gpu:
            lines.append("  " + gpu)
        return part

    part = head("install", "install the carried wheels")
    if part:
        text = (scratch / "install.txt").read_text(errors="replace") if (scratch / "install.txt").exists() else ""
        keep = [line for line in text.splitlines() if re.match(r"^(\d+ wheels|\d+ requirements|  |versions)", line)]
        lines += ["  " + line.strip() for line in keep[:12]] or ["  " + x for x in tail_error(scratch / "install.txt")]

    part = head("extract", "extraction benchmark (benchmarks/extraction_speed.py)")
    if part:
        text = (out / "extract.txt").read_text(errors="replace") if (out / "extract.txt").exists() else ""
        rows = text.splitlines()
        start = next((i for i, line in enumerate(rows) if line.startswith("setting ")), None)
        shown = []
        if start is not None:
            noise = re.compile(r"^\[transformers\]|Warning|warn\(|^\s*_warn")
            shown = [line for line in rows[max(start - 1, 0) :] if line.strip() and not noise.search(line)]
            lines += ["  " + line for line in shown]
        if part["rc"] != "0" or start is None:
            lines += ["  " + x for x in tail_error(out / "extract.txt") if x not in shown]

    part = head("estimate", "snakemake cost_estimate")
    if part:
        text = (out / "estimate.txt").read_text(errors="replace") if (out / "estimate.txt").exists() else ""
        rows = text.splitlines()
        first = next((i for i, line in enumerate(rows) if re.match(r"^\d+ model jobs; ", line)), None)
        last = next((i for i, line in enumerate(rows) if line.startswith("total: ")), None)
        if first is not None and last is not None and last > first:
            lines += ["  " + rows[first][:300]]
            lines += ["  " + line for line in rows[first + 1 : last] if line.startswith("  ")][:12]
            lines += ["  " + rows[last]]
        else:
            lines += ["  " + x for x in tail_error(out / "estimate.txt")]

    part = head("profile", "finetuning step profile (benchmarks/step_profile.py)")
    if part:
        text = (out / "profile.txt").read_text(errors="replace") if (out / "profile.txt").exists() else ""
        rows = [line for line in text.splitlines() if re.match(rf"^({'|'.join(KINDS)})\b", line)]
        header = [line for line in text.splitlines() if "demonstration a step" in line]
        shown = header[:1] + rows
        lines += ["  " + line for line in shown]
        if part["rc"] != "0" or not rows:
            lines += ["  " + x for x in tail_error(out / "profile.txt") if x not in shown]
            missing = [k for k in KINDS if not any(re.match(rf"^{k}\b", r) for r in rows)]
            lines += [f"  no line for: {', '.join(missing)}"] if missing else []

    part = head("grid", "the benchmark grid (snakemake --keep-going, time-limited)")
    if part:
        grid_lines = (scratch / "failed.txt").read_text().splitlines() if (scratch / "failed.txt").exists() else []
        lines += ["  " + line.strip() for line in grid_lines[:2]]
        lines += ["    " + line.strip() for line in grid_lines[2:12]]
        if not grid_lines:
            lines += ["  " + x for x in tail_error(out / "grid.txt")]

    part = head("check", "estimate against the finished jobs (benchmarks/cost_check.py --markdown)")
    if part:
        text = (out / "check.md").read_text(errors="replace") if (out / "check.md").exists() else ""
        rows = text.splitlines()
        start = next((i for i, line in enumerate(rows) if re.match(r"^\d+ of \d+ estimated jobs", line)), None)
        if start is not None:
            table = [line for line in rows[start:] if line.startswith("|") or line.startswith(rows[start][:4])]
            lines += ["  " + line for line in table[:16]]
        else:
            lines += ["  " + x for x in tail_error(out / "check.md") if not re.match(r"^\s*\d+ x ", x)]

    if samples:
        lines.append(f"\n[GPU over the whole check] {gpu_during(samples, samples[0][0], samples[-1][0])}")
    names = sorted({p.name for p in out.iterdir() if p.is_file()} | {"summary.txt"})
    lines.append(f"\nfiles: {', '.join(names)} in {out}")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    (out / "summary.txt").write_text(text)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("verify", help="the downloaded wheels against the list and their requirements")
    p.add_argument("--wheels", default=str(REPO / ".whl"))
    p.add_argument("--list", default=str(WHEELS))
    p.set_defaults(fn=verify)
    p = sub.add_parser("deps", help="the installed versions against every requirement")
    p.set_defaults(fn=deps)
    p = sub.add_parser("cost-device", help="the cost_device for a GPU's name")
    p.add_argument("gpu")
    p.set_defaults(fn=cost_device)
    p = sub.add_parser("failed", help="the grid's finished and failed jobs; failed jobs' records moved aside")
    p.add_argument("--log", required=True)
    p.add_argument("--workdir", required=True)
    p.add_argument("--before", type=float, help="errors from this epoch second on: jobs stopped at the limit")
    p.set_defaults(fn=failed)
    p = sub.add_parser("summary", help="one summary of every part")
    p.add_argument("--out", required=True)
    p.add_argument("--scratch", required=True)
    p.set_defaults(fn=summary)
    args = parser.parse_args()
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
