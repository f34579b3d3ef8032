# The two commands of the README: `make run` and `make test`. Both create .venv if it is missing.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
# pip resolves torch==2.13.0 to the local CPU wheel; never add --index-url here (it would pull a CUDA build).
PIP    := $(PY) -m pip install --disable-pip-version-check -q
# Installs go through uv (installed into the venv by pip): it resolves and downloads in parallel, so the dev install
# takes ≈ 9 s of uv (17–21 s with the venv and the import check) instead of pip's ≈ 83 s here, with the same versions. uv does not read pip's configuration, so it is
# given pip's find-links (where the local torch CPU wheel lies); where uv cannot be installed or fails, pip installs.
# Installs compile no bytecode: compiling all of site-packages (≈ 26,000 files) took 28 s of the install's 44 s
# here, and the suite imports about a fifth of them. Instead every recipe runs with bytecode writing on, so each
# module is compiled once, by the first process that imports it, and its .pyc kept (≈ 11 s of CPU for all a run
# imports). PYTHONDONTWRITEBYTECODE, which this machine's environment sets, is therefore not passed to recipes:
# with it set and nothing compiled, every process would compile its imports again (`make test` took 1,556 → 1,935 s
# of CPU from a fresh clone of e7c8c33, which had neither).
unexport PYTHONDONTWRITEBYTECODE
comma := ,
FIND_LINKS = $(foreach d,$(sort $(PIP_FIND_LINKS) $(shell $(PY) -m pip config get global.find-links 2>/dev/null)),--find-links $(d))
install_pkgs = { $(PIP) uv && $(VENV)/bin/uv pip install -q --python $(PY) $(FIND_LINKS) $(1); } \
               || $(PIP) $(1)

.PHONY: results-doc run run-measured run-gemma run-qwen study-pools test test-fast test-full bench install install-dev clean-warehouse prefect-up prefect-down chromium

$(PY):
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml setup.py | $(PY)
	$(call install_pkgs,-e .)
	$(PY) -c "import cr2, cr2_tasks, prefect, torch, duckdb" 
	touch $@

# one install call installs cr2 with its test extras (a fresh venv resolves everything once); it marks the plain
# install done too, so `make run` after `make test` installs nothing
$(VENV)/.installed-dev: pyproject.toml setup.py | $(PY)
	$(call install_pkgs,-e '.[dev$(comma)dask]')
	$(PY) -c "import cr2, prefect, torch, duckdb, pytest, xdist, hypothesis, prefect_dask, schemathesis"
	touch $(VENV)/.installed $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

run: install
	$(VENV)/bin/cr2 run

# the measured scenario (MMLU-Pro, real model outputs) in its own warehouse, var/mmlu-pro (docs/measured.md)
run-measured: install
	$(VENV)/bin/cr2 run -c configs/mmlu-pro-measured.yaml --home var/mmlu-pro

# the ZeroEval device-class ladders (GSM8K, CRUXEval, MATH-L5; real model outputs), each in its own warehouse
run-gemma: install
	$(VENV)/bin/cr2 run -c configs/zeroeval-gemma.yaml --home var/zeroeval-gemma
run-qwen: install
	$(VENV)/bin/cr2 run -c configs/zeroeval-qwen.yaml --home var/zeroeval-qwen

# the MMLU-Pro pool sweep (docs/pools.md): 13 pools of a written-down rule on a 2,000-question sample
study-pools: install
	$(VENV)/bin/cr2 study pools -c configs/mmlu-pro-pools-sample.yaml --home var/mmlu-pro-sample

# Parallel test workers (pytest-xdist): one per core, at most 4. Each test module runs whole on one worker
# (--dist loadfile: a module's fixtures are built once), the heaviest modules first (tests/conftest.py orders them).
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); [ $$n -gt 4 ] && n=4; echo $$n)
XDIST  := -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

# every test but the full-size runs and the few marked `full` (slices of every scenario, the slow end-to-end ones
# included); what CI runs. It lists the 20 slowest tests at the end, so a run shows where its time went.
test: install-dev chromium
	$(PY) -m pytest -q -m "not fullsize and not full" $(XDIST) --durations=20

# headless Chromium for tests/test_report_browser.py: installed on CI (CI=true) when missing (Debian's package);
# elsewhere that one test is skipped, with the reason, when chromium is absent
chromium:
	@if [ "$$CI" = "true" ] && ! command -v chromium >/dev/null 2>&1; then \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$SUDO apt-get install -y chromium || { $$SUDO apt-get update && $$SUDO apt-get install -y chromium; } \
	    || echo "chromium could not be installed: tests/test_report_browser.py will be skipped (with the reason)"; \
	fi

test-fast: install-dev
	$(PY) -m pytest -q -m "not slow and not fullsize and not full" $(XDIST)

# the full-size runs (`cr2 run` on the whole default set and the whole measured scenario, checked) and the tests
# marked `full`: the real Prefect server end to end (tests/test_prefect_server.py) (≈ 28 min)
test-full: install-dev
	$(PY) -m pytest -q -m "fullsize or full"

# docs/results.md from the stored runs of the warehouses above (cr2_cli/resultsdoc); `git diff docs/results.md`
# after it is empty when the warehouses hold the runs the page was made from
results-doc: install
	$(PY) -m cr2_cli.resultsdoc

bench: install-dev
	$(PY) benchmarks/run_all.py

# the local Prefect stack of docs/operations.md: server, work pool, deployments, worker (scripts/prefect-stack.sh)
prefect-up: install
	PY=$(abspath $(PY)) scripts/prefect-stack.sh up

prefect-down:
	PY=$(abspath $(PY)) scripts/prefect-stack.sh down

clean-warehouse:
	rm -rf var/cr2.duckdb var/prefect-results var/report var/export
