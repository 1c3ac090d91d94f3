# pai: the two commands of the README, and a few more for developers.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test bench install migrate demo check clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -e '.[test]'
	touch $@

install: $(VENV)/.installed

migrate: install
	$(PY) manage.py migrate --noinput

demo: migrate
	$(PY) manage.py seed_demo

# The service on its embedded defaults: SQLite, ORM broker, local backend, demo data.
# Ctrl-C stops the web server and the worker together.
run: demo
	@echo ""
	@echo "pai is starting at http://$(HOST):$(PORT)/  (admin: http://$(HOST):$(PORT)/admin/)"
	@echo ""
	@trap 'kill 0' INT TERM EXIT; \
	$(PY) manage.py qcluster & \
	$(PY) manage.py runserver --noreload $(HOST):$(PORT)

# The whole suite. CI sets DATABASE_URL to a PostgreSQL server; without it, SQLite.
test: install
	$(PY) -m pytest $(PYTEST_ARGS)

bench: install
	@for script in benchmarks/bench_*.py; do echo "== $$script"; $(PY) $$script || exit 1; done

check: install
	$(PY) manage.py check
	$(PY) manage.py makemigrations --check --dry-run

clean:
	rm -rf $(VENV) var staticfiles .pytest_cache .hypothesis
