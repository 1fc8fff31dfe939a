"""Operator configuration from the environment, so the Deployment and the CLI agree."""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class OperatorSettings:
    metrics_port: int
    runner_image: str
    runner_command: tuple[str, ...]

    @classmethod
    def from_env(cls) -> OperatorSettings:
        command = os.environ.get("MCP_RUNNER_COMMAND", "mcp-operator shard")
        return cls(
            metrics_port=int(os.environ.get("MCP_METRICS_PORT", "9090")),
            runner_image=os.environ.get("MCP_RUNNER_IMAGE", "ghcr.io/mcp2026/mcp-operator:0.1.0"),
            runner_command=tuple(command.split()),
        )
