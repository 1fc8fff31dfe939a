"""OpenAI-compatible completions and chat completions, streamed over SSE (vLLM, TensorRT-LLM, SGLang, TGI).

Two clients read the same wire format through one :class:`~mcp_bench.protocols.openai_stream.OpenAIBody`
(what a record holds is documented there): the lean keep-alive client of
:mod:`mcp_bench.protocols.openai_fast` (the default: it stamps tokens when their bytes come off the
socket) and the one on aiohttp of :mod:`mcp_bench.protocols.openai_aiohttp` (``http_client:
aiohttp`` in the plan), which stamps them when aiohttp hands the bytes over, a loop turn or so later.
Why only a factory here: this module picks one of them for a plan and registers the backends
when the engine imports it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mcp_bench.protocols import register_protocol
from mcp_bench.protocols.openai_aiohttp import OpenAIClient
from mcp_bench.protocols.openai_fast import FastOpenAIClient

if TYPE_CHECKING:
    from mcp_bench.plan import RunPlan

__all__ = ["FastOpenAIClient", "OpenAIClient", "openai_factory"]


def openai_factory(plan: RunPlan, max_connections: int) -> OpenAIClient | FastOpenAIClient:
    """The plan's choice of OpenAI client (the lean one by default, as for plain HTTP)."""
    if plan.http_client == "aiohttp":
        return OpenAIClient.from_plan(plan, max_connections)
    return FastOpenAIClient.from_plan(plan, max_connections)


register_protocol("openai", openai_factory)
register_protocol("openai-chat", openai_factory)
