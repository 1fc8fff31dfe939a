"""What an OpenAI client is built from, shared by the lean client and the one on aiohttp.

Why a module of its own: both clients take the same settings (and build them from a plan the
same way) while each carries its bytes differently; kept here, neither client module imports
the other for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Self

from mcp_bench.protocols.openai_stream import OpenAIRequest, endpoint_url, server_root

if TYPE_CHECKING:
    from mcp_bench.plan import RunPlan


class OpenAISettings:
    """What an OpenAI client is built from (both the lean one and the aiohttp one)."""

    def __init__(
        self,
        url: str,
        model: str,
        *,
        chat: bool = False,
        stream: bool = True,
        timeout_s: float = 30.0,
        max_connections: int = 100,
        options: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        fixed_output: bool = False,
    ) -> None:
        self.root = server_root(url)
        self.request = OpenAIRequest(model, chat, stream, dict(options or {}), fixed_output)
        self._setup(
            endpoint_url(url, chat),
            {"Content-Type": "application/json", **(headers or {})},
            timeout_s,
            max_connections,
        )

    def _setup(self, url: str, headers: dict[str, str], timeout_s: float, max_connections: int) -> None:
        self.url = url
        self.headers = headers
        self.timeout_s = timeout_s
        self.max_connections = max_connections

    @property
    def model(self) -> str:
        return self.request.model

    @property
    def chat(self) -> bool:
        return self.request.chat

    @classmethod
    def from_plan(cls, plan: RunPlan, max_connections: int) -> Self:
        p = plan.payload
        return cls(
            plan.url,
            plan.model,
            chat=plan.backend == "openai-chat",
            stream=p.stream,
            timeout_s=plan.request_timeout_s,
            max_connections=max_connections,
            options=dict(p.options),
            headers=dict(p.headers),
            fixed_output=p.fixed_output_tokens,
        )
