"""Read shard results back and verify them: a result whose checksum or shape is wrong is
rejected with a reason, never merged; failed shard pods say why in their termination message."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mcp_bench.results.document import (
    ChecksumMismatchError,
    DocumentFormatError,
    ResultDocument,
    loads_document,
)


@dataclass
class ShardReadout:
    documents: list[ResultDocument] = field(default_factory=list)
    rejected: dict[str, str] = field(default_factory=dict)  # object name -> why


def read_shards(objects: list[tuple[str, str | None]]) -> ShardReadout:
    """Parse every published shard (name, text); bad ones land in ``rejected`` with a reason."""
    readout = ShardReadout()
    for name, text in objects:
        if not text:
            readout.rejected[name] = "empty result"
            continue
        try:
            readout.documents.append(loads_document(text))
        except ChecksumMismatchError as exc:
            readout.rejected[name] = f"checksum: {exc}"
        except DocumentFormatError as exc:
            readout.rejected[name] = f"format: {exc}"
    return readout


def pod_failure_messages(pods: list[Any]) -> list[str]:
    """``pod: message`` for every failed shard pod, from its termination message (the shard
    writes why it failed there; the kubelet falls back to the log tail)."""
    messages = []
    for pod in pods:
        if pod.status.phase != "Failed":
            continue
        for container in pod.status.container_statuses or []:
            terminated = container.state.terminated if container.state else None
            if terminated is not None and terminated.exit_code:
                text = (terminated.message or terminated.reason or "").strip().splitlines()
                detail = text[-1] if text else f"exit code {terminated.exit_code}"
                messages.append(f"{pod.metadata.name}: {detail[:300]}")
    return messages
