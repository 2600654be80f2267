# The two commands a newcomer needs: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PORT ?= 8000

.PHONY: install install-dev run test lint format bench migrate dist clean focus-validator

# The server depends on the node agent's distribution (agent/: the collectors package); both are installed from
# this checkout in one pip call, so the agent never comes from an index.
$(VENV)/.installed: pyproject.toml agent/pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ./agent -e .
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed pyproject.toml agent/pyproject.toml
	$(PY) -m pip install -q -e './agent[kubelet]' -e '.[dev]'
	touch $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

migrate: install
	$(PY) manage.py migrate --noinput

## Serve the app on the embedded default (SQLite under var/, tasks in-process), with a month of demo data.
## Static files under hashed names, compressed, cached for a year (STATIC_MANIFEST), as production serves them.
run: migrate
	$(PY) manage.py seed_demo
	STATIC_MANIFEST=1 $(PY) manage.py collectstatic --noinput -v0
	@echo "serving http://127.0.0.1:$(PORT)/  (API: http://127.0.0.1:$(PORT)/api/v1/)"
	STATIC_MANIFEST=1 $(PY) manage.py runserver --nostatic 127.0.0.1:$(PORT)

## The suite runs in TEST_WORKERS processes (pytest-xdist; each with a database and a Redis index of its own, see
## tests/isolation.py), whole files to a process, since several files share a session's services. TEST_WORKERS=0: one.
TEST_WORKERS ?= 2
COV := --cov=governance --cov=collectors --cov-branch
# The embedded default (SQLite, tasks in-process) ingests and prices through statements of its own: run those
# paths on it too, whatever DATABASE_URL says, so `make run`'s write path is tested wherever the suite runs.
EMBEDDED_TESTS := tests/usage/test_writer_stages.py tests/usage/test_ingest.py tests/costs/test_ledger.py \
	tests/costs/test_commitments.py

## The whole suite: lint and format, types, migrations in step with models, the write path on the embedded
## default, then pytest on DATABASE_URL; the branch coverage of both runs together is printed at the end (files
## fully covered are left out of the table; the TOTAL line is the figure to watch).
test: install-dev focus-validator
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy governance collectors
	$(PY) manage.py makemigrations --check --dry-run
	env -u DATABASE_URL -u CELERY_BROKER_URL $(PY) -m pytest -q $(COV) --cov-report= $(EMBEDDED_TESTS)
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile $(COV) --cov-append --cov-report=term:skip-covered

lint: install-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: install-dev
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

## Benchmarks against PostgreSQL (DATABASE_URL); prints `name: value` lines. ONLY=costs runs one area
## (ingest, collectors, costs, pages; `usage` and `dashboard` name theirs too). The fleet load test
## (ONLY=fleet, see benchmarks/fleet.py) is sized by GPUS= (default 100000) and FLEET_INTERVAL_S,
## FLEET_COMPRESSION, FLEET_HOURS in the environment.
bench: install-dev
	$(if $(GPUS),FLEET_GPUS=$(GPUS)) $(PY) -m benchmarks $(foreach area,$(ONLY),--only $(area))

## The FinOps Foundation's FOCUS validator, in a virtual environment of its own (it needs Python >= 3.12 and pins
## numpy < 2, which ours does not), built once under var/ per set of pins; prints its path last.
## tests/costs/test_focus_validator.py runs it on our exports (and runs this target where the build is missing).
FOCUS_VALIDATOR_PINS := focus-validator==2.2.1 pyarrow<26
FOCUS_VALIDATOR_VENV := var/focus-validator-$(shell printf '%s' '$(FOCUS_VALIDATOR_PINS)' | sha1sum | cut -c1-12)
FOCUS_PYTHON ?= $(firstword $(wildcard $(PYENV_ROOT)/versions/3.12*/bin/python3.12 \
	$(HOME)/.pyenv/versions/3.12*/bin/python3.12 /usr/local/bin/python3.12 /usr/bin/python3.12))

$(FOCUS_VALIDATOR_VENV)/.installed:
	@test -n "$(FOCUS_PYTHON)" || { echo "focus-validator needs Python 3.12 (set FOCUS_PYTHON)" >&2; exit 3; }
	rm -rf $(FOCUS_VALIDATOR_VENV)
	$(FOCUS_PYTHON) -m venv $(FOCUS_VALIDATOR_VENV)
	$(FOCUS_VALIDATOR_VENV)/bin/python -m pip install -q $(foreach pin,$(FOCUS_VALIDATOR_PINS),'$(pin)')
	touch $@

focus-validator: $(FOCUS_VALIDATOR_VENV)/.installed
	@echo $(CURDIR)/$(FOCUS_VALIDATOR_VENV)/bin/focus-validator

## Regenerate the committed OpenAPI schema after an API change (tests/api/test_schema.py checks it).
openapi: install
	$(PY) manage.py spectacular --file docs/openapi.yaml --validate

## Both wheels into dist/: gpu_governance_collector (the node agent alone) and gpu_governance (the server).
dist:
	rm -rf dist build agent/build
	$(PYTHON) -m pip wheel -q --no-deps -w dist ./agent .
	rm -rf build agent/build
	@ls -1 dist

clean:
	rm -rf $(VENV) var dist build agent/build
