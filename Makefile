# The two set-up commands of the README are `make demo` and `make test`; everything they need
# is installed from here: the Python environment, Debian packages, and the control-plane
# binaries (built from the Go module proxy into ~/.cache/mcp-operator, reused across clones).
#
# `make demo` installs and builds only what the demo runs (the product and the harness; the API
# server, controller manager, scheduler and etcd); `make test` adds the test tools (the test
# extras, Prometheus and a headless browser from Debian, kwok, helm, the xDS bed, the Lua runner).
# Each step prints one line with its time; its output goes to .make-logs/<step>.log and is shown
# only when it fails.
SHELL := /bin/bash
VENV ?= .venv
BIN := $(VENV)/bin
LOGS := .make-logs
# the drift tests; the HTML report's screenshot test; the real node (containers: e2e/test_realnode.py);
# Argo CD's cache (e2e/test_argocd_sync.py); the registry the README's path to your own cluster pushes
# to; the report screens' fonts. Without their recommendations (49 packages, not 208: no systemd,
# GTK, Samba or Perl), as the real node's own installer (realnode/debs.py) does
APT_PACKAGES := prometheus chromium-headless-shell containerd runc containernetworking-plugins docker.io \
	mmdebstrap iptables tini ipset redis-server docker-registry fonts-dejavu-core fonts-liberation
DEMO_COMPONENTS := kubernetes etcd
# the slowest first (on a fresh machine Chaos Mesh and Argo CD take the longest after Kubernetes),
# so that two at a time no long build is left to run alone at the end
TEST_COMPONENTS := chaos-mesh argocd helm kwok coredns kubernetes-node xdsbed luahealth actionlint
# both cores, one test file per worker at a time (module fixtures stay on one worker; each worker
# that runs an e2e file starts its own control plane); the 25 slowest tests and every skip with
# its reason
PYTEST := $(BIN)/pytest -q -n 2 --dist loadfile --durations=25 -rfEs
STRESS_RUNS ?= 3

.PHONY: image demo demo-vllm demo-down test test-stress mutate lint docs unit e2e toolchain demo-toolchain python-env \
	python-test-env system-packages realnode-images clean

# $(call step,NAME,COMMAND): run COMMAND quietly, print NAME and its time, or its log on failure
define step
	@mkdir -p $(LOGS); started=$$(date +%s%N); \
	if ( $(2) ) >$(LOGS)/$(1).log 2>&1; then \
	  ms=$$(( ($$(date +%s%N) - started) / 1000000 )); \
	  printf '%-24s done in %d.%ds\n' '$(1)' $$((ms / 1000)) $$(( (ms % 1000) / 100 )); \
	else \
	  echo "$(1) FAILED; the end of $(LOGS)/$(1).log:"; tail -n 60 $(LOGS)/$(1).log; exit 1; \
	fi
endef

$(BIN)/.installed-demo: pyproject.toml harness/pyproject.toml
	$(call step,python-env,python3 -m venv $(VENV) && $(BIN)/pip install -q --upgrade pip && \
	  $(BIN)/pip install -q -e '.[plot]' -e ./harness)
	@touch $@

$(BIN)/.installed: $(BIN)/.installed-demo
	$(call step,python-test-extras,$(BIN)/pip install -q -e '.[test]' -e ./harness)
	@touch $@

system-packages:
	$(call step,debian-packages,missing=; for pkg in $(APT_PACKAGES); do \
	  dpkg -s $$pkg >/dev/null 2>&1 || missing="$$missing $$pkg"; done; \
	  if [ -n "$$missing" ]; then apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; fi)

# the demo's binaries build with the machine's python3 (the build code needs only the standard
# library), beside the virtual environment's installation
demo-toolchain:
	@$(MAKE) --no-print-directory -s -j2 --output-sync=target python-env $(addprefix build-,$(DEMO_COMPONENTS))

# one queue, two at a time: Kubernetes and Chaos Mesh start at once rather than the test builds
# waiting for the demo's
toolchain:
	@$(MAKE) --no-print-directory -s -j2 --output-sync=target build-kubernetes build-chaos-mesh \
	  python-env build-etcd python-test-env system-packages $(addprefix build-,$(filter-out chaos-mesh,$(TEST_COMPONENTS)))
	@$(MAKE) --no-print-directory -s realnode-images

# the real node's images (Debian base, pause, the operator from the Dockerfile, the reference
# server), built once per source digest into ~/.cache/mcp-operator
realnode-images: python-test-env system-packages
	$(call step,realnode-images,$(BIN)/mcp-devcluster realnode images)

# the operator's and the reference server's images for your own cluster (README: "In your own
# cluster"), built offline from the Dockerfile by the harness's Docker daemon (root), saved under
# .out/images and loaded into your Docker when one answers: then `docker push $(IMAGE)`
IMAGE ?= mcp-operator:dev
REFSERVER_IMAGE ?= mcp-refserver:dev
IMAGE_DIR ?= .out/images
image: python-env system-packages
	@$(BIN)/mcp-devcluster image --operator $(IMAGE) --refserver $(REFSERVER_IMAGE) --output $(IMAGE_DIR)

python-env: $(BIN)/.installed-demo
python-test-env: $(BIN)/.installed

build-%:
	$(call step,build-$*,PYTHONPATH=harness python3 -m mcp_devcluster.build $*)

# the kubelet's build reuses most of the control plane's compiled packages: after it, never beside it
build-kubernetes-node: build-kubernetes

# KEEP=1 keeps the demo's cluster and samples to explore (kubectl get mcpr, kubectl mcp board, the
# HTML report); `make demo-down` stops it. A cold first run says first what it installs and builds.
demo:
	@$(MAKE) --no-print-directory -s -q $(BIN)/.installed-demo 2>/dev/null || \
	  echo "python-env: installing the product and the harness into $(VENV) (about 1 min, once)"
	@PYTHONPATH=harness python3 -m mcp_devcluster.buildnotice $(DEMO_COMPONENTS)
	@$(MAKE) --no-print-directory -s demo-toolchain
	@$(BIN)/mcp-devcluster demo $(if $(filter 1 yes true,$(KEEP)),--keep)

demo-vllm:  # the same samples against a real vLLM (its CPU build, installed on first use)
	@$(MAKE) --no-print-directory -s -q $(BIN)/.installed-demo 2>/dev/null || \
	  echo "python-env: installing the product and the harness into $(VENV) (about 1 min, once)"
	@PYTHONPATH=harness python3 -m mcp_devcluster.buildnotice $(DEMO_COMPONENTS)
	@$(MAKE) --no-print-directory -s demo-toolchain
	$(BIN)/mcp-devcluster demo --target vllm $(if $(filter 1 yes true,$(KEEP)),--keep)

# stops the control plane a `make demo KEEP=1` left running (its own state directory)
demo-down:
	@$(BIN)/mcp-devcluster down --state-dir \
	  "$$($(BIN)/python -c 'from mcp_devcluster.demo import demo_state_dir; print(demo_state_dir())')"

# the documentation site (mkdocs.yml, docs/), built strictly: a broken link or anchor, or a page
# left out of nav, fails it (and so `make lint` and `make test`)
docs: $(BIN)/.installed
	$(call step,docs-site,$(BIN)/mkdocs build --strict -d $(LOGS)/site)

lint: $(BIN)/.installed docs
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

unit: $(BIN)/.installed system-packages
	$(PYTEST) tests

e2e: toolchain
	$(PYTEST) e2e

test: toolchain lint
	$(PYTEST) tests e2e

# the tests marked `timing` run STRESS_RUNS times while one core is kept busy and a second local
# control plane runs beside the tests' own; any failure fails it
test-stress: toolchain
	$(BIN)/mcp-devcluster stress --runs $(STRESS_RUNS) -- -q -m timing tests e2e

# mutation testing (mutmut) of the modules that decide verdicts, one run per module of
# [tool.mutate.modules] in pyproject.toml against the unit tests listed for it; prints the killed
# share per module and fails below 90 %. Not part of `make test` (minutes per module).
# MUTATE="health redact" limits it to modules whose path contains one of the words; MUTATE_ARGS="--diff"
# shows what each surviving mutant changed.
mutate: $(BIN)/.installed
	$(BIN)/python -m mcp_devcluster.mutate $(MUTATE_ARGS) $(MUTATE)

clean:
	rm -rf $(VENV) $(LOGS) .pytest_cache .mypy_cache .ruff_cache mutants
