# The two set-up commands of the README are `make demo` and `make test`; everything they need
# is installed from here: the Python environment, Debian packages, and the control-plane
# binaries (built from the Go module proxy into ~/.cache/mcp-operator, reused across clones).
VENV ?= .venv
BIN := $(VENV)/bin
APT_PACKAGES := prometheus chromium-headless-shell  # the HTML report's screenshot test

.PHONY: demo demo-vllm test lint unit e2e toolchain system-packages clean

$(BIN)/.installed: pyproject.toml e2e/cluster/pyproject.toml
	python3 -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]' -e ./e2e/cluster
	touch $@

system-packages:
	@for pkg in $(APT_PACKAGES); do \
	  dpkg -s $$pkg >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$pkg; }; \
	done

toolchain: $(BIN)/.installed system-packages
	$(BIN)/mcp-devcluster build

demo: toolchain
	$(BIN)/mcp-devcluster demo

demo-vllm: toolchain  # the same samples against a real vLLM (its CPU build, installed on first use)
	$(BIN)/mcp-devcluster demo --target vllm

lint: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

unit: $(BIN)/.installed system-packages
	$(BIN)/pytest -q tests

e2e: toolchain
	$(BIN)/pytest -q e2e

test: toolchain lint
	$(BIN)/pytest -q tests e2e

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
