# Every target sets up what it needs (a virtualenv in .venv, the package, the kernelspec) first,
# and does nothing more when that is already done.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.cemcp-installed

.PHONY: setup lab quickstart test lint bench clean

setup: $(STAMP)

$(PY):
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[lab,test,microsandbox]"
	$(PY) -m cemcp_kernel install --sys-prefix
	$(PY) -m cemcp_kernel sandbox-packages
	touch $(STAMP)

# The main job: JupyterLab with the cemcp kernel on the first tutorial.
lab: $(STAMP)
	$(VENV)/bin/jupyter lab $(if $(filter 0,$(shell id -u)),--allow-root) notebooks/01_quickstart.ipynb

# The same tutorial, headless: executed by the cemcp kernel and printed as Markdown.
quickstart: $(STAMP)
	cd notebooks && ../$(VENV)/bin/jupyter nbconvert --execute --allow-errors --to markdown --stdout \
		--NbConvertBase.display_data_priority="['text/plain']" 01_quickstart.ipynb

# The whole test suite: lint, unit and kernel tests, and the tutorials under nbval.
test: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m pytest --nbval

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

bench: $(STAMP)
	$(PY) bench/sandbox.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
