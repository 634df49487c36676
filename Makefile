# Two commands matter: `make run` and `make test`. Both set everything up first.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: run test bench lint baseline reliability clean setup clients browser trace-demo vendor-check

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,baseline]'
	rm -f $(VENV)/.installed-*
	touch $@

setup: $(STAMP)

run: $(STAMP)
	$(BIN)/exai serve

# The real IDE clients (Claude Code, Codex CLI) at pinned versions, from npm into
# ~/.cache/exai-tests; nothing is installed once they are there.
clients: $(STAMP)
	$(BIN)/python -m tests.clients.install

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

test: $(STAMP) clients browser
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist worksteal $(PYTEST_ARGS)

bench: $(STAMP)
	$(BIN)/python -m scripts.bench.run_all

baseline: $(STAMP)
	$(BIN)/python -m scripts.baseline_collection.main --with-emulator

reliability: $(STAMP)
	$(BIN)/python -m pytest -q -m reliability tests/reliability $(PYTEST_ARGS)

# A consensus call as one trace in Arize Phoenix, which runs from a virtual environment
# of its own (build/phoenix/venv, created on first use). ARGS="--screenshot FILE.png".
trace-demo: $(STAMP)
	$(BIN)/python -m scripts.trace_demo $(ARGS)

# Moonshot's and Z.ai's documented rules checked against the live APIs, with the keys
# of .env or the environment (docs/vendors.md); without keys it says what it would
# check. ARGS="--vendor kimi", "--record", "--list".
vendor-check: $(STAMP)
	$(BIN)/python -m scripts.vendor_check $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check src tests scripts
	$(BIN)/ruff format --check src tests scripts
	$(BIN)/mypy src
	$(BIN)/lint-imports

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
