"""The ``http`` backend: plain HTTP requests to one URL, latency from send to the last body byte.

Why only a factory here: the two clients live in modules of their own, the lean keep-alive one
(:mod:`mcp_bench.protocols.http_fast`, the default) and the one on aiohttp
(:mod:`mcp_bench.protocols.http_aiohttp`, ``http_client: aiohttp`` in the plan); this module picks
one for a plan and registers the backend when the engine imports it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mcp_bench.protocols import register_protocol
from mcp_bench.protocols.http_aiohttp import HttpClient
from mcp_bench.protocols.http_fast import FastHttpClient

if TYPE_CHECKING:
    from mcp_bench.plan import RunPlan

__all__ = ["FastHttpClient", "HttpClient", "http_factory"]


def http_factory(plan: RunPlan, max_connections: int) -> HttpClient | FastHttpClient:
    """The plan's choice of plain HTTP client (the lean one by default)."""
    if plan.http_client == "aiohttp":
        return HttpClient.from_plan(plan, max_connections)
    return FastHttpClient.from_plan(plan, max_connections)


register_protocol("http", http_factory)
