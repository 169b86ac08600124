#!/usr/bin/env bash
# One command measures a GPU (issue 60, item 5), for a session lent a GPU machine for a few
# minutes: that machine reaches no package index, so what the project needs beyond its image
# travels as wheels (benchmarks/gpu_wheels.txt) in the git-ignored folder .whl/.
#
#   bash benchmarks/gpu_check.sh --download    # here, once: the wheels into .whl/, checked (~39 MiB)
#   bash benchmarks/gpu_check.sh               # there, in the repository's root, with .whl carried
#   bash benchmarks/gpu_check.sh --tiny        # a rehearsal on a CPU: small shapes, a tiny grid
#
# On the GPU machine, in one call of about 6-7 minutes (--total), each part in a time limit of its
# own, a part that fails or runs out of time reported and the next one run all the same:
#   install   the carried wheels into /tmp/site (pip --target; PYTHONPATH=/tmp/site:src), then
#             every requirement of the wheels and of the project against what Python then imports
#   extract   python benchmarks/extraction_speed.py --shape 1.3b --dtype bfloat16 --device cuda
#             --examples 256 --naive-examples 8 --batch-size 64 --train-steps 8
#   estimate  snakemake cost_estimate --configfile configs/benchmark-1.3b.yaml
#             --config cost_device=<the GPU's, where the schema names it, else H100>; per-job table
#   profile   python benchmarks/step_profile.py --shape 1.3b --dtype bfloat16 --device cuda
#             --kinds gd,lcgd,linearized --steps 3 (where a finetuning step's time goes)
#   grid      snakemake --keep-going --configfile configs/benchmark-1.3b.yaml, stopped at its limit
#             (what the others leave of --total, or --grid-seconds), with the GPU's utilisation and
#             memory sampled every 0.5 s (nvidia-smi) over the whole check
#   check     python benchmarks/cost_check.py --markdown on the jobs that finished (failed jobs'
#             records moved aside first, each failure listed), then benchmarks/timeline.py
# and then one summary: the device and versions, each part's figures or its error.
#
# Files (at most 8, into $OUT, else --out, default /tmp/gpu_check): summary.txt (the summary, then
# the parts' times and the install's output), extract.txt, estimate.txt, estimate.tsv (per job),
# profile.txt, grid.txt (Snakemake's output), check.md, gpu.csv (nvidia-smi's samples).
# The run itself goes to --workdir (default /tmp/gpu_check_run, emptied first).
#
# Options:
#   --download          fetch the listed wheels into .whl/ (emptied first) and check them; no run
#   --tiny              a CPU rehearsal: benchmarks/gpu_check_tiny.yaml, small shapes, no install
#   --total S           the whole check's time in seconds (default 360; --tiny: 480)
#   --grid-seconds S    the grid's limit (default: what the total leaves after the other parts)
#   --out DIR           where the files go when $OUT is unset (default /tmp/gpu_check)
#   --workdir DIR       the run's folder (default /tmp/gpu_check_run)
#   --configfile FILE   the grid's config (default configs/benchmark-1.3b.yaml)
#   --cores N           Snakemake's cores (default: nproc)
#   --python PY         the Python (default python3; --tiny: .venv/bin/python where there is one)
#   --no-install        skip the wheels' install (a machine that has them already)
#   --site DIR          where the wheels are installed (default /tmp/site)
#   --profile-before F  the step profile also counts the training.py in file F (an older
#                       version, carried: the copy has no git history) beside today's
# The summary names the commit from git, else from $GPU_CHECK_COMMIT (a copy without .git).

set -uo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO" || exit 1
SELF="$REPO/benchmarks/gpu_check.sh"
PLATFORMS=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64)

# ---------------------------------------------------------------------------------------------
# One part's body, run by the main script as `bash gpu_check.sh --part NAME` under `timeout`,
# with the settings in the environment (GC_*).

part() {
    case "$1" in
    install)
        shopt -s nullglob
        local wheels=(.whl/*.whl)
        if [ ${#wheels[@]} -eq 0 ]; then
            echo "error: no wheels in .whl/: run 'bash benchmarks/gpu_check.sh --download' where pip reaches an index, and carry .whl"
            return 1
        fi
        if ! "$GC_PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
            --target "$GC_SITE" "${wheels[@]}" >"$GC_SCRATCH/pip.txt" 2>&1; then
            cat "$GC_SCRATCH/pip.txt"
            echo "error: pip install failed"
            return 1
        fi
        grep -v "^WARNING: Target directory" "$GC_SCRATCH/pip.txt"
        echo "${#wheels[@]} wheels installed into $GC_SITE ($(du -sm .whl | cut -f1) MiB carried)"
        "$GC_PY" benchmarks/gpu_check.py deps
        ;;
    extract)
        "$GC_PY" benchmarks/extraction_speed.py "${EXTRACT_ARGS[@]}"
        ;;
    estimate)
        "$GC_PY" -m snakemake cost_estimate --cores "$GC_CORES" -s "$REPO/Snakefile" --directory "$GC_WORK" \
            --configfile "$GC_CONFIG" --config cost_device="$GC_COST_DEVICE" || return
        cp "$GC_WORK/results/cost_estimate.tsv" "$GC_OUT/estimate.tsv"
        ;;
    profile)
        if [ ! -f benchmarks/step_profile.py ]; then
            echo "error: benchmarks/step_profile.py is not in this checkout"
            return 2
        fi
        "$GC_PY" benchmarks/step_profile.py "${PROFILE_ARGS[@]}" ${GC_BEFORE:+--before "$GC_BEFORE"}
        ;;
    grid)
        "$GC_PY" -m snakemake --cores "$GC_CORES" -s "$REPO/Snakefile" --directory "$GC_WORK" \
            --configfile "$GC_CONFIG" --keep-going
        ;;
    check)
        "$GC_PY" benchmarks/gpu_check.py failed --log "$GC_OUT/grid.txt" --workdir "$GC_WORK" \
            --before "$GC_DEADLINE" >"$GC_SCRATCH/failed.txt"
        cat "$GC_SCRATCH/failed.txt"
        echo
        local rc=0
        "$GC_PY" benchmarks/cost_check.py --markdown --workdir "$GC_WORK" || rc=$?
        echo
        echo '```'
        "$GC_PY" benchmarks/timeline.py --workdir "$GC_WORK" --cores "$GC_CORES"
        echo '```'
        # every finished job's own record, so that a later cost model can be set against them
        echo
        echo "Records (results/benchmarks/<rule>/...tsv: path, then the record):"
        echo '```'
        find "$GC_WORK/results/benchmarks" -name '*.tsv' -size +0 2>/dev/null | sort | while read -r f; do
            printf '%s\t%s\n' "${f#"$GC_WORK"/results/benchmarks/}" "$(tr '\n' '|' <"$f")"
        done
        echo '```'
        return $rc
        ;;
    esac
}

# The parts' arguments: the 1.3B shape on CUDA, or small ones on the CPU (--tiny).
if [ "${GC_MODE:-gpu}" = tiny ]; then
    EXTRACT_ARGS=(--shape gpt2-small --dtype float32 --device cpu --examples 16 --naive-examples 2
        --batch-size 8 --train-steps 2 --prefix-tokens 256)
    PROFILE_ARGS=(--shape tiny24 --dtype float32 --device cpu --kinds gd,lcgd,linearized --steps 2)
else
    EXTRACT_ARGS=(--shape 1.3b --dtype bfloat16 --device cuda --examples 256 --naive-examples 8
        --batch-size 64 --train-steps 8)
    PROFILE_ARGS=(--shape 1.3b --dtype bfloat16 --device cuda --kinds gd,lcgd,linearized --steps 3)
fi

if [ "${1:-}" = --part ]; then
    part "$2"
    exit
fi

# ---------------------------------------------------------------------------------------------
# Options.

MODE=gpu DOWNLOAD=0 INSTALL=1 TOTAL="" GRID_S="" OUTDIR=/tmp/gpu_check WORK=/tmp/gpu_check_run
CONFIG="" CORES=$(nproc) PY="" SITE=/tmp/site BEFORE=""
while [ $# -gt 0 ]; do
    case "$1" in
    --download) DOWNLOAD=1 ;;
    --tiny) MODE=tiny ;;
    --no-install) INSTALL=0 ;;
    --total) TOTAL=$2; shift ;;
    --grid-seconds) GRID_S=$2; shift ;;
    --out) OUTDIR=$2; shift ;;
    --workdir) WORK=$2; shift ;;
    --configfile) CONFIG=$2; shift ;;
    --cores) CORES=$2; shift ;;
    --python) PY=$2; shift ;;
    --site) SITE=$2; shift ;;
    --profile-before) BEFORE=$2; shift ;;
    -h | --help) sed -n '2,/^$/p' "$SELF" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown option: $1 (--help lists them)" >&2; exit 2 ;;
    esac
    shift
done
if [ -z "$PY" ]; then
    if [ "$MODE" = tiny ] || [ "$DOWNLOAD" = 1 ]; then
        [ -x "$REPO/.venv/bin/python" ] && PY="$REPO/.venv/bin/python" || PY=python3
    else
        PY=python3
    fi
fi

# ---------------------------------------------------------------------------------------------
# --download: here, where pip reaches an index.

if [ "$DOWNLOAD" = 1 ]; then
    mkdir -p .whl
    rm -f .whl/*.whl
    binary=() build=()
    while read -r spec flag; do
        if [ "${flag:-}" = build ]; then build+=("$spec"); else binary+=("$spec"); fi
    done < <(sed 's/#.*//' benchmarks/gpu_wheels.txt | awk 'NF')
    "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        "${PLATFORMS[@]}" -d .whl "${binary[@]}" || exit 1
    for spec in "${build[@]}"; do  # pure Python, no wheel on the index: built from its sdist
        "$PY" -m pip wheel -q --no-deps --no-binary=:all: -w .whl "$spec" || exit 1
    done
    "$PY" benchmarks/gpu_check.py verify --wheels .whl
    exit
fi

# ---------------------------------------------------------------------------------------------
# The check.

[ -n "$TOTAL" ] || { [ "$MODE" = tiny ] && TOTAL=480 || TOTAL=360; }
[ -n "$CONFIG" ] || { [ "$MODE" = tiny ] && CONFIG=benchmarks/gpu_check_tiny.yaml || CONFIG=configs/benchmark-1.3b.yaml; }
CONFIG=$(realpath "$CONFIG")
[ "$MODE" = tiny ] && INSTALL=0
[ -n "${OUT:-}" ] && OUTDIR=$OUT
mkdir -p "$OUTDIR" || exit 1
OUTDIR=$(realpath "$OUTDIR")
FILES=(summary.txt extract.txt estimate.txt estimate.tsv profile.txt grid.txt check.md gpu.csv)
for f in "${FILES[@]}"; do rm -f "$OUTDIR/$f"; done
WORK=$(realpath -m "$WORK")
if [ -e "$WORK" ] && [ ! -e "$WORK/.gpu_check_run" ] && [ -n "$(ls -A "$WORK" 2>/dev/null)" ]; then
    echo "error: $WORK is not empty and was not made by this script: name another --workdir" >&2
    exit 2
fi
rm -rf "$WORK"
SCRATCH="$WORK/gpu_check"
mkdir -p "$SCRATCH" && touch "$WORK/.gpu_check_run" || exit 1
PY=$(command -v "$PY") || { echo "error: no Python $PY" >&2; exit 2; }

export GC_MODE=$MODE GC_PY=$PY GC_SITE=$SITE GC_WORK=$WORK GC_OUT=$OUTDIR GC_SCRATCH=$SCRATCH
export GC_CONFIG=$CONFIG GC_CORES=$CORES GC_DEADLINE=0 GC_COST_DEVICE=H100 GC_BEFORE=$BEFORE
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 MPLBACKEND=Agg
export PATH="$(dirname "$PY"):$GC_SITE/bin:$PATH"
export PYTHONPATH="$REPO/src${PYTHONPATH:+:$PYTHONPATH}"
[ "$INSTALL" = 1 ] && export PYTHONPATH="$GC_SITE:$PYTHONPATH"

SAMPLER=""
stop_sampler() { [ -n "$SAMPLER" ] && kill "$SAMPLER" 2>/dev/null; wait "$SAMPLER" 2>/dev/null; SAMPLER=""; }
trap stop_sampler EXIT

say() { echo "[$(date +%T) +${SECONDS}s] $*"; }
left() { echo $((TOTAL - SECONDS)); }
# Each part's own limit, and the least it is worth running (the parts before it leave that much
# of the total to each part after it): extract, estimate, profile, grid (what is left), check.
if [ "$MODE" = tiny ]; then OWN=(120 150 90 0 60) MIN=(30 30 30 30 15); else OWN=(120 120 80 0 30) MIN=(45 45 30 40 15); fi
# an older training.py beside today's doubles the profile (on an H200, 80 s held GD's two alone)
[ -n "$BEFORE" ] && OWN[2]=$((2 * OWN[2]))
# a part's limit: its own, or less where the parts after it (reserve) would run out of the total
limit() {
    local own=$1 reserve=$2 rest
    rest=$(($(left) - reserve))
    [ "$rest" -lt "$own" ] && own=$rest
    [ "$own" -lt 20 ] && own=20
    echo "$own"
}
NOTE=""
run_part() {  # run_part NAME LIMIT FILE: the part's body under timeout, its output into FILE
    local name=$1 budget=$2 file=$3 start end rc
    say "$name: up to $budget s"
    start=$(date +%s.%N)
    timeout -k 20 "$budget" bash "$SELF" --part "$name" >"$file" 2>&1
    rc=$?
    end=$(date +%s.%N)
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$rc" "$start" "$end" "$budget" "$NOTE" >>"$SCRATCH/parts.tsv"
    NOTE=""
    say "$name: exit $rc"
    return $rc
}
printf 'part\trc\tstart\tend\tbudget\tnote\n' >"$SCRATCH/parts.tsv"

say "GPU check ($MODE): total $TOTAL s, output in $OUTDIR, run in $WORK"
GPU_NAME=""
if command -v nvidia-smi >/dev/null; then
    GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
    nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv,noheader,nounits -lms 500 \
        >"$OUTDIR/gpu.csv" 2>/dev/null &
    SAMPLER=$!
fi
{
    echo "when: $(date -u +%FT%TZ); mode: $MODE; config: ${CONFIG#"$REPO"/}"
    echo "machine: $(nproc) cores, $(uname -m), kernel $(uname -r), $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 2^20}' /proc/meminfo)"
    if [ -n "$GPU_NAME" ]; then
        echo "gpu: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1)"
    else
        echo "gpu: none (no nvidia-smi)"
    fi
    echo "commit: ${GPU_CHECK_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo 'unknown: no git here (set GPU_CHECK_COMMIT)')}"
} >"$SCRATCH/env.txt"

# install
if [ "$INSTALL" = 1 ]; then
    run_part install "$(limit 90 $((MIN[0] + MIN[1] + MIN[2] + MIN[3] + MIN[4])))" "$SCRATCH/install.txt"
else
    echo "not installed (--no-install or --tiny): $PY as it is" >"$SCRATCH/install.txt"
fi
"$PY" - >>"$SCRATCH/env.txt" 2>&1 <<'EOF'
import platform
from importlib import metadata

def version(name):
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "missing"

line = f"versions: python {platform.python_version()}"
for name in ("torch", "transformers", "snakemake", "pandas", "numpy", "pyarrow", "tokenizers"):
    line += f", {name} {version(name)}"
try:
    import torch

    line += f"; torch sees CUDA {torch.version.cuda}: {torch.cuda.is_available()}"
except Exception as e:  # reported, not fatal
    line += f"; torch: {type(e).__name__}: {e}"
print(line)
EOF
if [ -n "$GPU_NAME" ]; then
    GC_COST_DEVICE=$("$PY" benchmarks/gpu_check.py cost-device "$GPU_NAME" 2>>"$SCRATCH/env.txt") || GC_COST_DEVICE=H100
fi
echo "cost_device: $GC_COST_DEVICE" >>"$SCRATCH/env.txt"
cat "$SCRATCH/env.txt"

# the fixed parts, then the grid in what they leave, then the check of the grid
run_part extract "$(limit "${OWN[0]}" $((MIN[1] + MIN[2] + MIN[3] + MIN[4])))" "$OUTDIR/extract.txt"
run_part estimate "$(limit "${OWN[1]}" $((MIN[2] + MIN[3] + MIN[4])))" "$OUTDIR/estimate.txt"
run_part profile "$(limit "${OWN[2]}" $((MIN[3] + MIN[4])))" "$OUTDIR/profile.txt"

GRID=$(($(left) - MIN[4] - 10))
[ -n "$GRID_S" ] && [ "$GRID_S" -lt "$GRID" ] && GRID=$GRID_S
[ "$GRID" -lt "${MIN[3]}" ] && [ -z "$GRID_S" ] && GRID=${MIN[3]}
[ "$GRID" -lt 10 ] && GRID=10
export GC_DEADLINE=$(($(date +%s) + GRID))
NOTE="limit $GRID s"
run_part grid "$GRID" "$OUTDIR/grid.txt"
# Killing Snakemake ends the jobs it started; a job in the warm worker ends when its client does,
# and the worker when Snakemake is gone. Wait for what still runs in the run's folder, then end it.
for _ in $(seq 30); do
    left_over=$(for p in /proc/[0-9]*; do [ "$(readlink "$p/cwd" 2>/dev/null)" = "$WORK" ] && echo "${p#/proc/}"; done)
    [ -z "$left_over" ] && break
    sleep 1
done
for pid in $left_over; do kill "$pid" 2>/dev/null; done
[ -n "$left_over" ] && sleep 3 && for pid in $left_over; do kill -9 "$pid" 2>/dev/null; done
size=$(stat -c %s "$OUTDIR/grid.txt" 2>/dev/null || echo 0)
if [ "$size" -gt 8000000 ]; then  # Snakemake's output of a long grid: its end
    tail -c 8000000 "$OUTDIR/grid.txt" >"$SCRATCH/grid.tail" && mv "$SCRATCH/grid.tail" "$OUTDIR/grid.txt"
fi

run_part check "$(limit "${OWN[4]}" 5)" "$OUTDIR/check.md"
stop_sampler

"$PY" benchmarks/gpu_check.py summary --out "$OUTDIR" --scratch "$SCRATCH" || column -t "$SCRATCH/parts.tsv"
{
    echo
    echo "--- the parts (epoch seconds) ---"
    cat "$SCRATCH/parts.tsv"
    echo "--- install ---"
    cat "$SCRATCH/install.txt"
} >>"$OUTDIR/summary.txt"
say "done in $SECONDS s"
