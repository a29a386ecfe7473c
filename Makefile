# gpulint developer commands. `make demo` and `make test` work on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck unit integration bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

## Set up and lint a shipped example (exits 0 even though the example has findings).
demo: $(STAMP)
	-$(BIN)/gpulint fixtures/examples/llm-server.Dockerfile
	@echo
	$(BIN)/gpulint fixtures/examples/llm-server-good.Dockerfile && echo "llm-server-good.Dockerfile: clean"

## Set up and run everything CI runs: ruff, mypy, the whole test suite.
test: $(STAMP) lint typecheck
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# mypy needs the installed layout (linter/ -> gpulint, rules/ -> gpulint.rules): check a copy.
typecheck: $(STAMP)
	rm -rf build/typecheck && mkdir -p build/typecheck/gpulint
	cp -r linter/. build/typecheck/gpulint/ && cp -r rules build/typecheck/gpulint/rules
	cd build/typecheck && ../../$(BIN)/mypy --config-file ../../pyproject.toml -p gpulint

unit: $(STAMP)
	$(BIN)/python -m pytest -q -m "not integration"

bench: $(STAMP)
	$(BIN)/python benchmarks/run.py

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .ruff_cache .pytest_cache
