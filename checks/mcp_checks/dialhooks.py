"""How checks open connections to the addresses a spec names. ``mcp-check`` dials what it is
told; the operator injects its target policy here (``mcp_checks`` imports nothing of the
operator's), and each client applies it where it connects, to the address it connects to: a
name resolved once for a policy and again by the client may answer differently the second time.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import requests
from urllib3.util.retry import Retry

SocketFactory = Callable[[tuple[Any, ...]], socket.socket]


@dataclass(frozen=True)
class DialHooks:
    """``socket_factory``: aiohttp's, called with each address about to be connected to (it
    raises an ``OSError`` to refuse one; picklable, a probe round runs in a worker process).
    ``requests_guard``: holds a requests session for a URL (with the given retries) to the
    policy, redirects included. ``grpc_target``: ``host:port`` to the checked address a gRPC
    channel dials.
    ``refusal_mark``: what a refusal's message carries, so a row can quote it."""

    socket_factory: SocketFactory | None = None
    requests_guard: Callable[[requests.Session, str, Retry], None] | None = None
    grpc_target: Callable[[str], Awaitable[str]] | None = None
    refusal_mark: str = ""

    def refusal(self, exc: BaseException) -> str | None:
        """The refusal's own sentence (an address and the rule's reason, no URL) where ``exc``
        is one, however a client wrapped it; else None."""
        if not self.refusal_mark:
            return None
        found = re.search(rf"([^\"'\[\]()]*{re.escape(self.refusal_mark)})", str(exc))
        return None if found is None else found.group(1).strip()

    def connector(self, **kwargs: Any) -> aiohttp.TCPConnector:
        return aiohttp.TCPConnector(socket_factory=self.socket_factory, **kwargs)

    def guard(self, session: requests.Session, url: str, retry: Retry) -> None:
        """Every connection ``session`` opens for ``url`` through the policy (call it after a
        library mounted its own adapter there)."""
        if self.requests_guard is not None:
            self.requests_guard(session, url, retry)

    async def grpc_address(self, address: str) -> str:
        return address if self.grpc_target is None else await self.grpc_target(address)


OPEN = DialHooks()  # mcp-check's own: no policy
