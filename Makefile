# pai: the two commands of the README, and a few more for developers.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run serve test bench install system-deps sandbox-deps node-deps migrate demo check clean

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
run: demo sandbox-deps serve

# The web server and the worker together; Ctrl-C stops both, once each. Each runs in
# its own session, so the terminal's Ctrl-C reaches only this shell, which sends each a
# single SIGTERM (the servers would otherwise hear the signal twice), and the trap never
# signals its own process group (dash re-entered `trap 'kill 0' INT TERM EXIT` until it
# crashed). The trap is set before anything starts, so a Ctrl-C at any moment stops both
# (`pai.worker` keeps a stop that arrives while it starts), and the shell waits for both.
serve:
	@stopping=; web=; worker=; \
	trap '[ -n "$$stopping" ] || { stopping=1; [ -z "$$web$$worker" ] || kill $$web $$worker 2>/dev/null; }' INT TERM; \
	echo ""; \
	echo "pai is starting at http://$(HOST):$(PORT)/  (admin: http://$(HOST):$(PORT)/admin/)"; \
	echo ""; \
	setsid $(PY) -m pai.worker & worker=$$!; \
	setsid $(PY) manage.py runserver --noreload $(HOST):$(PORT) & web=$$!; \
	[ -z "$$stopping" ] || kill $$web $$worker 2>/dev/null; \
	wait $$web; \
	[ -n "$$stopping" ] || { stopping=1; kill $$worker 2>/dev/null; }; \
	until wait; do :; done; \
	echo "pai stopped."

# The local backend's sandbox (bubblewrap, Debian's package): it needs root anyway, so
# only root installs it here; without it the local backend runs one tenant's jobs only.
sandbox-deps:
	@if [ "$$(id -u)" = 0 ] && ! command -v bwrap >/dev/null; then \
	  echo "installing Debian's bubblewrap for the local backend's sandbox"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends bubblewrap >/dev/null) \
	    || echo "could not install bubblewrap: the local backend will run one tenant's jobs only"; \
	fi

# Real peers the integration tests start: Prometheus, Alertmanager and headless Chromium,
# from Debian's packages, bubblewrap for the local backend's sandbox, and Node.js with npm
# for OpenPAI's CLI. Installed once, only when missing.
system-deps:
	@missing=""; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	command -v prometheus-alertmanager >/dev/null || missing="$$missing prometheus-alertmanager"; \
	command -v prometheus >/dev/null || missing="$$missing prometheus"; \
	command -v bwrap >/dev/null || missing="$$missing bubblewrap"; \
	command -v node >/dev/null || missing="$$missing nodejs"; \
	command -v npm >/dev/null || missing="$$missing npm"; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

# OpenPAI's own JS SDK and CLI from npm, for the tests that run them against pai: the
# versions pinned in the lock file, installed again only when the lock file changes.
OPENPAI_CLI := tests/openpai_cli
$(OPENPAI_CLI)/node_modules/.installed: $(OPENPAI_CLI)/package-lock.json
	cd $(OPENPAI_CLI) && npm ci --no-audit --no-fund --silent
	touch $@

node-deps: system-deps $(OPENPAI_CLI)/node_modules/.installed

# The whole suite. CI sets DATABASE_URL to a PostgreSQL server; without it, SQLite.
# Two pytest-xdist workers (TEST_WORKERS=0 runs it in one process): each has its own test
# database (test_<name>_gw0, _gw1) and Redis database (tests/conftest.py). `--dist load`
# hands tests out in the suite's order, so each worker runs its share in that order too:
# the transactional tests (which empty the database) after the others, as in one process.
TEST_WORKERS ?= 2
test: install system-deps node-deps
	$(PY) -m pytest -n $(TEST_WORKERS) --dist load $(PYTEST_ARGS)

bench: install
	@for script in benchmarks/bench_*.py; do echo "== $$script"; $(PY) $$script || exit 1; done

check: install
	$(PY) manage.py check
	$(PY) manage.py makemigrations --check --dry-run

clean:
	rm -rf $(VENV) var staticfiles .pytest_cache .hypothesis $(OPENPAI_CLI)/node_modules
