# Countersign: `make run` (first use sets everything up) and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
# pyenv shims resolve `uv` through .python-version and may not find it, so we keep our own copy.
UV := $(shell if command -v uv >/dev/null 2>&1 && uv --version >/dev/null 2>&1; then echo uv; else echo .tools/bin/uv; fi)
MANAGE := $(UV) run --frozen python manage.py
# Python writes bytecode here even where PYTHONDONTWRITEBYTECODE is set (as on CI's machine):
# otherwise every process compiled the project from source again (0.3 s of CPU per Django process
# start, and the suite starts hundreds: its workers, each manage.py, server and harness process),
# and pytest rewrote and compiled every test module in each worker (16.6 s of CPU to collect the
# suite instead of 8 s). `make lint` runs first on CI, so the suite finds the project compiled.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: help setup run test test-full lint format bench broadcast-crash broadcast-latency nemesis cluster restore-drill modelcheck mutants messages stop clean

help:
	@echo "make run    - set up on first use, then web + worker + sandbox AgentMail + demo agent"
	@echo "make test   - the test suite on a private PostgreSQL"
	@echo "make test-full - the suite with fuzzers and harnesses at full size (tests/sizes.py)"
	@echo "make lint   - ruff check and format check, mypy, migrations check"
	@echo "make messages - refresh locale/*/django.po from the code (gettext needed), compile the .mo files"
	@echo "make stop   - stop the embedded PostgreSQL server"
	@echo "make nemesis - the whole system under random faults, checked (RELIABILITY.md)"
	@echo "make broadcast-crash - 5,000-recipient broadcast, worker killed 4 times (RELIABILITY.md)"
	@echo "make broadcast-latency - reply latency while a broadcast drains (BENCHMARKS.md)"
	@echo "make cluster - test hosts in network namespaces under network faults, checked (root; RELIABILITY.md)"
	@echo "make restore-drill - back up while sending, restore, workers on the copy; the provider's ledger checked"
	@echo "make modelcheck - spin explores the send protocol model (model/, RELIABILITY.md)"
	@echo "make mutants - mutation testing of hashing, policy and webhook verification (docs/mutants.md)"
	@echo "make bench  - side-by-side benchmarks (BENCHMARKS.md); BENCH_ARGS=--quick for a smoke run"

.tools/bin/uv:
	$(PYTHON) -m venv .tools
	.tools/bin/pip install --quiet --disable-pip-version-check uv

.venv/.synced: pyproject.toml uv.lock | $(if $(filter .tools/bin/uv,$(UV)),.tools/bin/uv)
	# Bytecode compiled once here, in parallel, not by every process of a first run (the suite's
	# workers and the harnesses' servers each compiled what they imported first).
	$(UV) sync --frozen --compile-bytecode
	@touch $@

# The demo mailboxes are not provisioned here: whatever answers on the sandbox port now may be
# another process (another clone's `make run`); devstack provisions them in the sandbox it started.
setup: .venv/.synced
	$(MANAGE) migrate --noinput
	$(MANAGE) seed_demo --without-mailboxes

run: setup
	$(UV) run --frozen python scripts/devstack.py

# The suite runs in pytest-xdist workers, each on its own test database (pytest-django names it
# test_countersign_gw0, _gw1, ...), a copy of one migrated template (tests/dbtemplate.py). It
# waits on subprocesses, HTTP, windows of time and Chromium more than it computes, so four
# workers pay on CI's two cores (2026-12-07, the same commit, nothing else running: 709 s with
# four, 783 s with three). PYTEST_XDIST= (empty) runs it in one process, for debugging;
# PYTEST_ARGS="-n 0" does too.
PYTEST_XDIST ?= -n 4
test: .venv/.synced
	COUNTERSIGN_ENV=test $(UV) run --frozen pytest $(PYTEST_XDIST) $(PYTEST_ARGS)

# The same suite with the heavy tests at the sizes they were written for (tests/sizes.py): more
# generated examples for the fuzzers and the state machine, schemathesis at 100 per operation.
test-full: .venv/.synced
	COUNTERSIGN_ENV=test COUNTERSIGN_TEST_SIZE=full $(UV) run --frozen pytest $(PYTEST_XDIST) $(PYTEST_ARGS)

lint: .venv/.synced
	$(UV) run --frozen ruff check .
	$(UV) run --frozen ruff format --check .
	COUNTERSIGN_ENV=test $(UV) run --frozen mypy
	$(MANAGE) makemigrations --check --dry-run

format: .venv/.synced
	$(UV) run --frozen ruff check --fix .
	$(UV) run --frozen ruff format .

broadcast-crash: .venv/.synced
	$(UV) run --frozen python -m reliability.broadcast_crash $(BROADCAST_CRASH_ARGS)

broadcast-latency: .venv/.synced
	$(UV) run --frozen python -m reliability.broadcast_latency $(BROADCAST_LATENCY_ARGS)

nemesis: .venv/.synced
	$(UV) run --frozen python -m reliability.nemesis $(NEMESIS_ARGS)

# Root (network namespaces), iproute2, nftables, redis-server, pgbouncer (Debian's packages).
cluster: .venv/.synced
	$(UV) run --frozen python -m reliability.cluster $(or $(CLUSTER_ARGS),--workers 3 --intents 2000 --fault-seconds 60 --seed 20)

# Backup while sending, restore into a fresh database, workers on it (DEPLOYMENT.md "Backup and restore").
restore-drill: .venv/.synced
	$(UV) run --frozen python -m reliability.restore_drill $(or $(DRILL_ARGS),--intents 300 --workers 2 --seed 5)

# spin (Debian's package) and gcc; MODELCHECK_ARGS="--small" for the suite's configuration only.
modelcheck: .venv/.synced
	$(UV) run --frozen python -m model.run $(MODELCHECK_ARGS)

bench: .venv/.synced
	$(UV) run --frozen python -m bench $(BENCH_ARGS)

# mutmut copies the code to mutants/ and runs the tests there; they use this checkout's database
# server (not a second one under mutants/) and a test database of their own.
mutants: .venv/.synced
	rm -rf mutants
	COUNTERSIGN_ENV=test COUNTERSIGN_DATA_DIR=$(CURDIR)/.data TEST_DATABASE_NAME=test_countersign_mutants \
		$(UV) run --frozen mutmut run $(MUTANTS_ARGS)
	$(UV) run --frozen mutmut results
	$(UV) run --frozen python scripts/mutants_check.py

# Translators: refresh the catalogues from the code, translate the new entries in locale/*/...po,
# run it again to compile. The .mo files are committed (a fresh clone needs no gettext);
# tests/tenants/test_translations.py fails when one is out of date with its .po.
LANGUAGES_SHIPPED := es de
MESSAGES_IGNORE := --ignore=.venv --ignore=.tools --ignore=.data --ignore=mutants --ignore=node_modules \
	--ignore=tests --ignore=static/vendor --ignore=reliability --ignore=bench --ignore=docs --ignore=scripts
messages: .venv/.synced
	$(MANAGE) makemessages $(addprefix -l ,$(LANGUAGES_SHIPPED)) --no-obsolete --add-location=file $(MESSAGES_IGNORE)
	$(MANAGE) compilemessages $(addprefix -l ,$(LANGUAGES_SHIPPED)) --ignore=.venv --ignore=.tools --ignore=mutants

stop: .venv/.synced
	$(MANAGE) dbserver stop

# A server that is not running (stopped already, or never started) is nothing to stop.
clean:
	-$(MANAGE) dbserver stop
	rm -rf .data .venv .tools mutants
