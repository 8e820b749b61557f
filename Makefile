# Every target sets up what it needs (a virtualenv in .venv, the package, the kernelspec) first,
# and does nothing more when that is already done.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.cemcp-installed
# Extras installed by setup (`test` includes lab, semantic, bench and microsandbox); `make setup
# EXTRAS=lab` gives a lighter install with keyword-only selection and no torch.
EXTRAS ?= test
# A real third-party MCP server from npm for the bridge tests, pinned, in ./node_modules.
EVERYTHING := @modelcontextprotocol/server-everything@2026.8.31
NODE_STAMP := node_modules/.cemcp-$(subst /,-,$(EVERYTHING))

.PHONY: setup lab quickstart test lint bench clean

setup: $(STAMP) $(NODE_STAMP)

$(PY):
	$(PYTHON) -m venv $(VENV)

# With the semantic extra, torch goes first and pinned: a bare torch requirement would pull the
# CUDA build (gigabytes); 2.13.0 resolves to the CPU wheel.
$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet --upgrade pip
	$(if $(or $(findstring semantic,$(EXTRAS)),$(findstring test,$(EXTRAS))),$(PY) -m pip install --quiet torch==2.13.0)
	$(PY) -m pip install --quiet -e ".[$(EXTRAS)]"
	$(PY) -m cemcp_kernel install --sys-prefix
	$(PY) -m cemcp_kernel sandbox-packages
	touch $(STAMP)

# Without npm this does nothing but say so; the tests that need the server are then skipped.
$(NODE_STAMP):
	@if command -v npm >/dev/null 2>&1; then \
		npm install --no-save --no-package-lock --no-audit --no-fund --prefix . $(EVERYTHING) \
		&& touch "$@"; \
	else \
		echo "npm not found: tests against $(EVERYTHING) will be skipped"; \
	fi

# The main job: JupyterLab with the cemcp kernel on the first tutorial.
lab: $(STAMP)
	$(VENV)/bin/jupyter lab $(if $(filter 0,$(shell id -u)),--allow-root) notebooks/01_quickstart.ipynb

# The same tutorial, headless: executed by the cemcp kernel and printed as Markdown.
quickstart: $(STAMP)
	cd notebooks && ../$(VENV)/bin/jupyter nbconvert --execute --allow-errors --to markdown --stdout \
		--NbConvertBase.display_data_priority="['text/plain']" 01_quickstart.ipynb

# The whole test suite: lint, unit and kernel tests, and the tutorials under nbval.
# Notebooks wait for the semantic model, so that which tools a cell sees never depends on timing.
test: $(STAMP) $(NODE_STAMP)
	$(PY) -m ruff check .
	CEMCP_SELECTION__WAIT=true $(PY) -m pytest --nbval

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

# Each benchmark prints a table and, as its last line, one JSON object of its figures.
bench: $(STAMP) $(NODE_STAMP)
	$(PY) bench/sandbox.py
	$(PY) bench/bridge.py
	$(PY) bench/retrieval.py
	$(PY) bench/retrieval.py --synthetic 10000
	$(PY) bench/tokens.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache node_modules
