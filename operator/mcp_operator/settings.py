"""Operator configuration from the environment, so the Deployment and the CLI agree."""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class OperatorSettings:
    metrics_port: int
    runner_image: str
    runner_command: tuple[str, ...]
    # measuring rounds at once (worker processes), and at once against one target
    max_concurrent_checks: int = 4
    max_checks_per_target: int = 2

    @classmethod
    def from_env(cls) -> OperatorSettings:
        command = os.environ.get("MCP_RUNNER_COMMAND", "mcp-operator shard")
        return cls(
            metrics_port=int(os.environ.get("MCP_METRICS_PORT", "9090")),
            runner_image=os.environ.get("MCP_RUNNER_IMAGE", "ghcr.io/mcp2026/mcp-operator:0.1.0"),
            runner_command=tuple(command.split()),
            max_concurrent_checks=max(1, int(os.environ.get("MCP_MAX_CONCURRENT_CHECKS", "4"))),
            max_checks_per_target=max(1, int(os.environ.get("MCP_MAX_CHECKS_PER_TARGET", "2"))),
        )
