# Operator and benchmark-runner image (the same image serves both: `mcp-operator run` and
# `mcp-operator shard`). `docker build .` from the repository root builds it from the Python
# base image and PyPI; the test harness builds the same file offline (mcp_devcluster.realnode):
# BASE is then a Debian root filesystem made by mmdebstrap and the context carries wheels/, a
# wheelhouse of the package and its dependencies, which PIP_FLAGS points pip at.
ARG BASE=python:3.11-slim
FROM ${BASE}
ARG PIP_FLAGS=""
# tini is PID 1: it forwards SIGTERM to the operator and reaps what the drills' load leaves
RUN command -v tini >/dev/null || (apt-get update && apt-get install -y --no-install-recommends tini \
    && rm -rf /var/lib/apt/lists/*)
COPY . /src
# Python runs with -OO (PYTHONOPTIMIZE=2): no docstrings held, 3 MiB of the operator's resident
# memory (docs/guarantees.md); the compiled files for it are made here, as the process may not
# write them, and only those (`mcp-operator crds` refuses under -OO: the CRDs' descriptions are
# docstrings)
RUN python3 -m venv /opt/mcp-operator \
    && /opt/mcp-operator/bin/pip install --no-cache-dir --no-compile ${PIP_FLAGS} /src \
    && /opt/mcp-operator/bin/python -OO -m compileall -q /opt/mcp-operator/lib \
    && rm -rf /src
ENV PATH=/opt/mcp-operator/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONOPTIMIZE=2
USER 65532:65532
ENTRYPOINT ["tini", "--", "mcp-operator"]
CMD ["run"]
