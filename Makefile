# Two commands matter: `make run` and `make test`. Both set everything up first.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: run test bench lint baseline reliability clean setup clients browser trace-demo vendor-check help

# pip -qq prints errors only. What it would print besides is warnings about the build: the
# ones pyproject.toml can fix are fixed there; setuptools still notes every editable install
# of a package whose folder is not its name (exai is src/), which no setting turns off.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -qq --upgrade pip
	$(BIN)/python -m pip install -qq -e '.[dev,baseline]'
	rm -f $(VENV)/.installed-*
	touch $@

## create .venv and install exai into it (again whenever pyproject.toml changes)
setup: $(STAMP)

## set up, then start the daemon in the foreground (.venv/bin/exai serve)
run: $(STAMP)
	$(BIN)/exai serve

## list the targets: each with the `## ` comment above it
help:
	@echo "make TARGET, where TARGET is one of:"
	@awk '/^## / { doc = substr($$0, 4) } \
	  /^[a-z][a-z0-9_-]*:([^=]|$$)/ { sub(/:.*/, "", $$1); printf "  %-14s%s\n", $$1, doc } \
	  !/^#/ { doc = "" }' $(firstword $(MAKEFILE_LIST))

## install the IDE clients the tests drive (Claude Code, Codex CLI)
# The real IDE clients (Claude Code, Codex CLI) at pinned versions, from npm into
# ~/.cache/exai-tests; nothing is installed once they are there.
clients: $(STAMP)
	$(BIN)/python -m tests.clients.install

## install Chromium for the console's browser tests, when it is missing
# Debian's Chromium for the console's browser tests (Playwright drives it through its
# executable path; Playwright's own browser download cannot reach its host). Installed
# once, when /usr/bin/chromium is missing.
browser:
	@test -x /usr/bin/chromium || { \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium; }

# Three pytest workers on two cores (pytest-xdist): most tests wait on subprocesses,
# sockets and the real clients, so a third worker fills the time the other two wait;
# work stealing keeps one slow module from holding a worker at the end.
# TEST_WORKERS=0 runs the suite in one process.
TEST_WORKERS ?= 3

## set up, then run the whole test suite (PYTEST_ARGS="-k NAME", TEST_WORKERS=N)
test: $(STAMP) clients browser
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist worksteal $(PYTEST_ARGS)

## run the benchmarks (scripts/bench)
bench: $(STAMP)
	$(BIN)/python -m scripts.bench.run_all

## measure a baseline against a throwaway daemon and the provider emulator
baseline: $(STAMP)
	$(BIN)/python -m scripts.baseline_collection.main --with-emulator

## run the long fault-injection tests (tests/reliability)
reliability: $(STAMP)
	$(BIN)/python -m pytest -q -m reliability tests/reliability $(PYTEST_ARGS)

## show a consensus call as one trace in Arize Phoenix
# A consensus call as one trace in Arize Phoenix, which runs from a virtual environment
# of its own (build/phoenix/venv, created on first use). ARGS="--screenshot FILE.png".
trace-demo: $(STAMP)
	$(BIN)/python -m scripts.trace_demo $(ARGS)

## check Moonshot's and Z.ai's documented rules against their live APIs
# Moonshot's and Z.ai's documented rules checked against the live APIs, with the keys
# of .env or the environment (docs/vendors.md); without keys it says what it would
# check. ARGS="--vendor kimi", "--record", "--list".
vendor-check: $(STAMP)
	$(BIN)/python -m scripts.vendor_check $(ARGS)

## check style, types and the import contracts: layers, faces, no cycles (ruff, mypy, import-linter)
lint: $(STAMP)
	$(BIN)/ruff check src tests scripts
	$(BIN)/ruff format --check src tests scripts
	$(BIN)/mypy src
	$(BIN)/lint-imports

## remove .venv and the tools' caches
clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
