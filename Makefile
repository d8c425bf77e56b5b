# traceview — `make help` lists the targets.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO := fixtures/demo.json.gz

.PHONY: help install demo test test-fast lint format typecheck bench clean

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

# The compiled core (rust/) is built by the install: a Rust toolchain is needed (rustup.rs).
RUST_SOURCES := rust/Cargo.toml $(wildcard rust/src/*.rs)
CARGO := cargo --quiet
CARGO_FLAGS := --manifest-path rust/Cargo.toml -j2

$(STAMP): pyproject.toml $(RUST_SOURCES)
	@command -v cargo >/dev/null || { echo "traceview: building it needs a Rust toolchain (cargo): install it from https://rustup.rs" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP) ## Create .venv and install traceview with its dev tools

demo: $(STAMP) ## Run traceview on the bundled demo trace
	$(BIN)/traceview summary $(DEMO)
	$(BIN)/traceview kernels $(DEMO) --top 8
	$(BIN)/traceview gaps $(DEMO) --hist-min 1 --gap-top 5 --largest 5
	$(BIN)/traceview steps $(DEMO)
	$(BIN)/traceview report $(DEMO) -o demo-report.html --force --quiet
	@echo "The HTML report: $(CURDIR)/demo-report.html (open it in a browser; it works offline)"

# The timing-sensitive tests (marked slow) run alone, after the rest has run in parallel, a
# file per process (some files' tests build on each other in order: the README's commands).
test: $(STAMP) ## Run the test suite (real traces from ../shared/traces when present), then cargo test
	$(CARGO) test $(CARGO_FLAGS)
	$(BIN)/python -m pytest -q -n auto --maxprocesses 4 --dist loadfile -m "not slow"
	$(BIN)/python -m pytest -q -m slow

test-fast: $(STAMP) ## Only the fast unit tests (tests/unit, no timing ratios)
	$(BIN)/python -m pytest -q tests/unit -m "not slow"

lint: $(STAMP) ## ruff lint and format check, mypy --strict, import layers; cargo fmt, clippy
	$(CARGO) fmt --manifest-path rust/Cargo.toml --check
	$(CARGO) clippy $(CARGO_FLAGS) --all-targets --all-features -- -D warnings
	$(BIN)/ruff check traceview tests fixtures benchmarks
	$(BIN)/ruff format --check traceview tests fixtures benchmarks
	$(BIN)/mypy traceview
	$(BIN)/lint-imports

format: $(STAMP) ## Format the code with ruff
	$(BIN)/ruff format traceview tests fixtures benchmarks
	$(BIN)/ruff check --fix traceview tests fixtures benchmarks

bench: $(STAMP) ## Reader MB/s + peak RSS, then gzip inflate speed (SIZES="100MB 1GB", BENCH_ARGS=--both)
	$(BIN)/python benchmarks/bench_read.py $(if $(SIZES),--sizes $(SIZES),) $(BENCH_ARGS)
	$(BIN)/python benchmarks/bench_inflate.py

clean: ## Remove the virtualenv and caches
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache build *.egg-info rust/target
	rm -f traceview/_core*.so
