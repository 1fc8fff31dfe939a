"""The address rule (:mod:`mcp_bench.dialguard`) for requests/urllib3, which connect on their
own: each new connection's peer is checked before a byte is sent (TLS included), and a refused
one is closed and raised as urllib3's ``NewConnectionError`` naming the rule's reason. Serves
the engine's Prometheus queries and the operator's (through ``mcp_checks``' injected hooks)."""

from __future__ import annotations

import socket
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import NewConnectionError
from urllib3.util.retry import Retry

from mcp_bench.dialguard import AddressRule, DialRefused, check_peer


def _checked(conn: HTTPConnection, sock: socket.socket, rule: AddressRule) -> socket.socket:
    try:
        check_peer(rule, sock.getpeername(), conn.host)
    except DialRefused as exc:
        sock.close()
        raise NewConnectionError(conn, str(exc)) from exc
    return sock


class _HTTPConnection(HTTPConnection):
    rule = AddressRule()

    def _new_conn(self) -> socket.socket:
        return _checked(self, super()._new_conn(), self.rule)


class _HTTPSConnection(HTTPSConnection):
    rule = AddressRule()

    def _new_conn(self) -> socket.socket:  # before TLS: nothing is sent to a refused peer
        return _checked(self, super()._new_conn(), self.rule)


class PolicyAdapter(HTTPAdapter):
    """A requests adapter whose new connections are refused unless their peer is allowed."""

    def __init__(self, rule: AddressRule, max_retries: Retry | int = 0) -> None:
        self._http = type("GuardedHTTPConnection", (_HTTPConnection,), {"rule": rule})
        self._https = type("GuardedHTTPSConnection", (_HTTPSConnection,), {"rule": rule})
        super().__init__(max_retries=max_retries)

    def init_poolmanager(self, connections: int, maxsize: int, block: bool = False, **kwargs: Any) -> None:
        super().init_poolmanager(connections, maxsize, block, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {
            "http": type("GuardedHTTPPool", (HTTPConnectionPool,), {"ConnectionCls": self._http}),
            "https": type("GuardedHTTPSPool", (HTTPSConnectionPool,), {"ConnectionCls": self._https}),
        }


def guard(session: requests.Session, url: str, rule: AddressRule | None, retry: Retry | int = 0) -> None:
    """Every connection of ``session`` through ``rule``: on ``url`` (over an adapter a library
    mounted there) and on any other URL a redirect leads to."""
    if rule is None:
        return
    for prefix in (url, "http://", "https://"):
        session.mount(prefix, PolicyAdapter(rule, retry))
