# Operator and benchmark-runner image (the same image serves both: `mcp-operator run` and
# `mcp-operator shard`). Not built in this repository's CI, which has no container engine.
FROM python:3.11-slim
WORKDIR /src
COPY pyproject.toml README.md ./
COPY operator operator
COPY bench bench
COPY checks checks
RUN pip install --no-cache-dir . && rm -rf /src
USER 65532:65532
ENTRYPOINT ["mcp-operator"]
CMD ["run"]
