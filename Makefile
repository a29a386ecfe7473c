# gpulint developer commands. `make demo` and `make test` work on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck unit integration bench bench-walk fuzz atheris realworld new-rule clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

## Set up and lint a shipped example. The example has findings on purpose: `--fail-on never`
## prints them and exits 0, so make reports no error; the fixed twin must be clean.
demo: $(STAMP)
	@$(BIN)/gpulint --fail-on never fixtures/examples/llm-server.Dockerfile
	@echo
	@$(BIN)/gpulint fixtures/examples/llm-server-good.Dockerfile && echo "llm-server-good.Dockerfile: clean"

## Set up and run everything CI runs: ruff, mypy, the whole test suite (the unit tests spread
## over the CPUs, then the integration tests - podman, registries, pre-commit - one at a time).
test: $(STAMP) lint typecheck
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q -n auto --dist worksteal -m "not integration"
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q -m integration

# mypy and lint-imports need the installed layout (linter/ -> gpulint, rules/ -> gpulint.rules):
# they check a copy in build/$(1).
define layout_copy
	rm -rf build/$(1) && mkdir -p build/$(1)/gpulint
	cp -r linter/. build/$(1)/gpulint/ && cp -r rules build/$(1)/gpulint/rules
endef

## ruff, and the import contracts in pyproject.toml ([tool.importlinter]: the layers, no cycles).
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(call layout_copy,imports)
	cd build/imports && PYTHONPATH=. ../../$(BIN)/lint-imports --no-cache ../../pyproject.toml

typecheck: $(STAMP)
	$(call layout_copy,typecheck)
	cd build/typecheck && ../../$(BIN)/mypy --config-file ../../pyproject.toml -p gpulint

## The quick unit tests while working: not the slow fuzz/property/hostile suites (`make test` runs them).
## Bytecode is written even where PYTHONDONTWRITEBYTECODE is set: without the cached modules and
## assertion-rewritten tests every worker compiles them again (a third of a unit run). Work
## stealing keeps both workers busy to the end (with --dist load one ran 7 s longer).
unit: $(STAMP)
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q -n auto --dist worksteal -m "not integration and not slow"

## Start a rule from templates: `make new-rule CODE=GL123 NAME=some-slug [FAMILY=base]` writes
## rules/<family>/gl123_some_slug.py, a fire and an ok fixture and tests/test_rule_gl123.py, and
## regenerates the rule docs. Every place to fill in says TODO(new-rule); a test fails while any does.
new-rule: $(STAMP)
	@test -n "$(CODE)" -a -n "$(NAME)" || { echo "usage: make new-rule CODE=GL123 NAME=some-slug [FAMILY=base]" >&2; exit 2; }
	$(BIN)/python scripts/new_rule.py "$(CODE)" "$(NAME)" $(if $(FAMILY),--family "$(FAMILY)")

## Side-by-side benchmarks (benchmarks/run.py) from a regular, non-editable install with the peers.
BENCH_VENV ?= build/bench-venv
BENCH_ARGS ?=
WALK_ARGS ?=
bench:
	rm -rf $(BENCH_VENV) && $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet '.[bench,lsp]'
	$(BENCH_VENV)/bin/python benchmarks/run.py $(BENCH_ARGS)

## The uncompressed image walk split into its stages beside tar -tf (benchmarks/walk_profile.py),
## from the install `make bench` made.
bench-walk:
	test -x $(BENCH_VENV)/bin/python || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet .
	$(BENCH_VENV)/bin/python -m pip install --quiet --no-deps --force-reinstall .
	$(BENCH_VENV)/bin/python benchmarks/walk_profile.py $(WALK_ARGS)

## Accuracy on the real-world corpus (fixtures/realworld/README.md): lint the cached files,
## diff against the verdicts, precision per rule and recall per category.
realworld: $(STAMP)
	$(BIN)/python benchmarks/realworld.py --json build/realworld-report.json $(REALWORLD_ARGS)
	$(BIN)/python benchmarks/optimize_realworld.py --json build/optimize-realworld.json

## The large fuzz job (issue #9): >= 100k generated inputs over tests/test_fuzz_*.py (the normal
## suite runs 40 per test). Counts per target go to build/fuzz-counts.json.
FUZZ_EXAMPLES ?= 1200
fuzz: $(STAMP)
	mkdir -p build && rm -f build/fuzz-counts.json
	GPULINT_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) GPULINT_FUZZ_REPORT=build/fuzz-counts.json \
		$(BIN)/python -m pytest -q -p no:cacheprovider tests/test_fuzz_dockerfile.py tests/test_fuzz_inputs.py tests/test_fuzz_image.py
	$(BIN)/python -c "import json; c = json.load(open('build/fuzz-counts.json')); print(json.dumps(c, indent=1)); print('generated inputs:', sum(c.values()))"

## Coverage-guided fuzzing of the Dockerfile + shell entry point for ATHERIS_SECONDS (atheris/libFuzzer).
ATHERIS_SECONDS ?= 300
atheris: $(STAMP)
	$(BIN)/python -m pip install --quiet 'atheris>=2.3'
	mkdir -p build/atheris-corpus && cp fixtures/examples/*Dockerfile* build/atheris-corpus/
	$(BIN)/python tests/fuzz/atheris_lint.py -max_total_time=$(ATHERIS_SECONDS) -rss_limit_mb=4096 \
		-timeout=30 build/atheris-corpus

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .ruff_cache .pytest_cache .hypothesis
