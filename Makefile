# Two commands: `make run` serves the API, `make test` checks and tests everything.
# Both set up what they need: the virtualenv, the packages and, for tests, PostgreSQL binaries.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: run test check format bench bench-scale postgres-binaries oidc-provider chromium wrk clean

$(INSTALLED): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $(INSTALLED)

run: $(INSTALLED)
	$(BIN)/accessgate serve --host 127.0.0.1 --port 8009

check: $(INSTALLED)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: $(INSTALLED)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

test: $(INSTALLED) postgres-binaries oidc-provider chromium check
	$(BIN)/pytest -n 3

bench: $(INSTALLED) postgres-binaries wrk
	status=0; \
	$(BIN)/python -m bench.reviews || status=$$?; \
	$(BIN)/python -m bench.handshake || status=$$?; \
	$(BIN)/python -m bench.slack || status=$$?; \
	$(BIN)/python -m bench.outbox || status=$$?; \
	$(BIN)/python -m bench.webhooks || status=$$?; \
	exit $$status

# A million reviews on SQLite and on PostgreSQL: lists, reads and approvals at that size.
bench-scale: $(INSTALLED) postgres-binaries
	$(BIN)/python -m bench.scale

# The tests start throwaway PostgreSQL clusters from the machine's own binaries.
postgres-binaries:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 || { \
		echo "installing PostgreSQL binaries with apt"; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq postgresql >/dev/null; }

# The sign-in tests run a real OpenID provider: the npm package oidc-provider, on Node.js.
OIDC_PROVIDER := testing/oidc_provider
oidc-provider:
	@command -v npm >/dev/null 2>&1 || { \
		echo "installing Node.js with apt"; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq nodejs npm >/dev/null; }
	@[ -d $(OIDC_PROVIDER)/node_modules/oidc-provider ] || \
		npm ci --prefix $(OIDC_PROVIDER) --no-audit --no-fund --loglevel=error

# The pages are tested in the machine's Chromium, driven by Playwright (whose own browser
# download is not used).
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
		echo "installing Chromium with apt"; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq chromium >/dev/null; }

wrk:
	@command -v wrk >/dev/null 2>&1 || { \
		echo "installing wrk with apt"; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq wrk >/dev/null; }

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
