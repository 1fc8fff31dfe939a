"""A JSONL dataset from a ConfigMap through the real operator: the Job mounts the ConfigMap
read-only into the shard pod, the pod (run by the local kubelet, which mounts it at the same
path) reads its prompts, and the reference server sees exactly the dataset's requests, cycled."""

from __future__ import annotations

import collections
import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcp_devcluster import stack

LINES = [
    {"prompt": "one two", "max_tokens": 3},
    {"prompt": "a b c d", "max_tokens": 5},
    {"prompt": "x y z w v u"},
]


@pytest.fixture
def server(tmp_path: Path) -> Any:
    proc, url = stack.start_refserver(tmp_path, "--ttft-ms", "1", "--tpot-ms", "1")
    try:
        yield url
    finally:
        stack.stop(proc)


def test_a_configmap_dataset_is_what_the_shards_send(kube: Any, server: str) -> None:
    dataset = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "prompts"},
        "data": {"chat.jsonl": "\n".join(json.dumps(line) for line in LINES) + "\n"},
    }
    kube.run("apply", "-f", "-", input_text=yaml.safe_dump(dataset))
    spec = {
        "target": {"url": server, "backend": "openai", "model": "refmodel"},
        "load": {"concurrency": [1], "requests": 30},
        "workload": {
            "dataset": {"configMap": {"name": "prompts", "key": "chat.jsonl"}, "defaultMaxTokens": 7}
        },
        "runner": {"nodeSelector": {"mcp2026.io/local-runner": "true"}},
    }
    kube.apply(stack.custom_resource("MCPBenchmark", "from-dataset", spec))
    waited = kube.wait("mcpbenchmark/from-dataset", "condition=Complete", timeout_s=180)
    status = kube.get("mcpbenchmark", "from-dataset").get("status")
    assert waited.returncode == 0, (waited.stderr, status)
    assert status["verdict"] == "Pass" and status["results"][0]["requests"] == 30, status
    job = kube.get("job", status["jobName"])
    pod = job["spec"]["template"]["spec"]
    assert {
        "name": "dataset",
        "configMap": {
            "name": "prompts",
            "items": [{"key": "chat.jsonl", "path": "dataset.jsonl"}],
            "defaultMode": 420,
        },
    } in pod["volumes"]
    with urllib.request.urlopen(server + "/debug/timings", timeout=10) as r:
        served = json.load(r)["output_tokens"]
    # every line once per cycle, in order: 30 requests at concurrency 1 are ten cycles
    assert collections.Counter(served) == {3: 10, 5: 10, 7: 10}, served
