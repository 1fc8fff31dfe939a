"""The operator's own connections to addresses a spec names, held to the target policy on the
address each one is opened to (``mcp_bench.dialguard``), not on an earlier resolution: a name
checked at admission and resolved again by the client may answer differently (DNS rebinding).

One rule, three clients: aiohttp (a socket factory, before connecting), requests (the peer of
each new connection, before a byte is sent: ``mcp_bench.dialguard_requests``) and gRPC (the name
resolved here, checked, and the checked address dialled). ``check_hooks`` hands all three to
``mcp_checks``.
"""

from __future__ import annotations

from typing import Any

import aiohttp

from mcp_bench.api import ENV, REFUSED, AddressRule, GuardedSocketFactory, dialguard, guard
from mcp_checks.api import DialHooks

from .policy import TargetPolicy


def rule(policy: TargetPolicy | None = None) -> AddressRule:
    return (policy or TargetPolicy.from_env()).rule


def socket_factory(policy: TargetPolicy | None = None) -> GuardedSocketFactory:
    return GuardedSocketFactory(rule(policy))


def connector(policy: TargetPolicy | None = None, **kwargs: Any) -> aiohttp.TCPConnector:
    """An aiohttp connector whose every connection (redirects' too) passes the policy."""
    return aiohttp.TCPConnector(socket_factory=socket_factory(policy), **kwargs)


def session(timeout_s: float, policy: TargetPolicy | None = None) -> aiohttp.ClientSession:
    return aiohttp.ClientSession(connector=connector(policy), timeout=aiohttp.ClientTimeout(total=timeout_s))


async def grpc_target(address: str, policy: TargetPolicy | None = None) -> str:
    """``host:port`` as the checked address a gRPC channel dials (``dialguard.grpc_target``)."""
    return await dialguard.grpc_target(rule(policy), address)


def check_hooks(policy: TargetPolicy | None = None) -> DialHooks:
    """What the operator's checks connect through: its target policy on every client."""
    checked = policy or TargetPolicy.from_env()
    return DialHooks(
        socket_factory=socket_factory(checked),
        requests_guard=lambda session, url, retry: guard(session, url, checked.rule, retry),
        grpc_target=lambda address: grpc_target(address, checked),
        refusal_mark=REFUSED,
    )


def pod_env(policy: TargetPolicy | None = None) -> dict[str, str]:
    """The environment entry that holds a pod's (or a child process's) clients to the policy on
    every address they connect to (``mcp_bench.dialguard`` reads it)."""
    return {"name": ENV, "value": rule(policy).to_env()}
