"""Every HTTP request counted by route and status (the server's side of retry amplification),
every connection that carried one counted (the server's side of a client's connection reuse),
and the optional load shedding (``max_inflight``) that answers 503 at once when the server is
full, the overload that clients retrying without backoff turn into a storm."""

from __future__ import annotations

import weakref
from collections.abc import Awaitable, Callable

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
# never shed: the probes and the scrape must see a full server as it is
UNSHED = frozenset({"/health", "/metrics", "/version"})


def route_path(request: web.Request) -> str:
    """The route's own path (``/v2/models/{model}/infer``), so the label stays bounded; a path
    no route serves is ``other``."""
    info = request.match_info
    route = info.route if info is not None else None
    resource = route.resource if route is not None else None
    return resource.canonical if resource is not None else "other"


class Traffic:
    """The request counter and the in-flight count behind the shedding."""

    def __init__(self, registry: CollectorRegistry, max_inflight: int) -> None:
        self.requests = Counter(
            "mcp_refserver_http_requests",
            "HTTP requests received, by route and status code (shed requests included)",
            ["path", "code"],
            registry=registry,
        )
        self.connections = Counter(
            "mcp_refserver_http_connections",
            "HTTP connections that carried at least one request (how often clients connected)",
            registry=registry,
        )
        # the transports seen so far; a closed one is forgotten with its object
        self._seen: weakref.WeakSet[object] = weakref.WeakSet()
        self.max_inflight = max_inflight
        self.inflight = 0

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        path = route_path(request)
        transport = request.transport
        if transport is not None and transport not in self._seen:
            self._seen.add(transport)
            self.connections.inc()
        if self.max_inflight and path not in UNSHED and self.inflight >= self.max_inflight:
            self.requests.labels(path, "503").inc()
            return web.Response(status=503, text="overloaded: shed\n", headers={"Retry-After": "1"})
        shed = path not in UNSHED
        if shed:
            self.inflight += 1
        code = "500"
        try:
            response = await handler(request)
            code = str(response.status)
            return response
        except web.HTTPException as exc:
            code = str(exc.status)
            raise
        finally:
            if shed:
                self.inflight -= 1
            self.requests.labels(path, code).inc()
