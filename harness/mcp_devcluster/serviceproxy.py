"""The harness's kube-proxy for the local nodes: every Service port answers on its ClusterIP.

The API server's service CIDR lies inside 127.0.0.0/8 (``addressplan``), so each ClusterIP is
a loopback address this process can listen on without root. For each TCP port of each Service
it listens on ClusterIP:port and forwards every new connection to the next ready endpoint of
the Service's EndpointSlices (round robin, ``serviceroutes``), dialling the pod IP's loopback
twin (``podnet``). A connection with no ready endpoint is reset, as kube-proxy rejects it.
Connections already forwarded stay as they are until either side closes, so those to a
deleted pod end when its process dies.

The admin endpoint listens on the socket that claims the cluster's address slot, inherited
from ``DevCluster.up``: ``GET /routes`` shows every route with its backends and when they last
changed (epoch seconds), so tests can time how fast a deleted pod stops getting connections;
``GET /healthz`` answers 200 once both watches have listed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import ipaddress
import json
import logging
import signal
import socket
import struct
import threading
import time
from pathlib import Path
from typing import Any

from .podnet import loopback_twin
from .serviceroutes import ListenKey, ObjectKey, RoundRobin, Route, RouteTable
from .servicewatch import SERVICES, SLICES, start_watches

log = logging.getLogger("mcp_devcluster.serviceproxy")

CONNECT_TIMEOUT_S = 5.0
CHUNK = 64 * 1024
RETRY_LISTEN_S = 2.0


class ServiceProxy:
    """Routes, listeners and forwarding; every method runs on one event loop."""

    def __init__(self, pod_loopback: ipaddress.IPv4Network) -> None:
        self.pod_loopback = pod_loopback
        self.table = RouteTable()
        self.balancer = RoundRobin()
        self.routes: dict[ListenKey, Route] = {}
        self.changed_at: dict[ListenKey, float] = {}
        self.listeners: dict[ListenKey, asyncio.Server] = {}
        self.errors: dict[ListenKey, str] = {}
        self.synced: set[str] = set()
        self.dirty = asyncio.Event()

    # -- what the watches hand over ---------------------------------------------------------
    def apply(self, kind: str, key: ObjectKey, record: Any) -> None:
        (self.table.set_service if kind == SERVICES else self.table.set_slice)(key, record)
        self._refresh()

    def replace(self, kind: str, records: dict[ObjectKey, Any]) -> None:
        store = self.table.services if kind == SERVICES else self.table.slices
        store.clear()
        store.update(records)
        self.synced.add(kind)
        self._refresh()

    def _refresh(self) -> None:
        """New routes take effect at once for new connections; listeners follow in ``serve``."""
        routes = self.table.routes()
        now = time.time()
        for key, route in routes.items():
            old = self.routes.get(key)
            if old is None or old.backends != route.backends:
                self.changed_at[key] = now
                log.info("%s %s:%d -> %s", route.service, *key, ", ".join(map(str, route.backends)) or "-")
        self.routes = routes
        self.dirty.set()

    # -- listeners ------------------------------------------------------------------------------
    async def serve(self) -> None:
        """Keep one listener per route, for ever: open new ones, close those of gone routes."""
        loop = asyncio.get_running_loop()
        while True:
            await self.dirty.wait()
            self.dirty.clear()
            for key in set(self.listeners) - set(self.routes):
                self.listeners.pop(key).close()
            for key in set(self.errors) - set(self.routes):
                del self.errors[key]
            for key in set(self.routes) - set(self.listeners):
                try:
                    handler = functools.partial(self._forward, key)
                    self.listeners[key] = await asyncio.start_server(handler, key[0], key[1])
                    self.errors.pop(key, None)
                except OSError as exc:  # a port below 1024 without privileges, say
                    if key not in self.errors:
                        log.error("cannot listen on %s:%d: %s", *key, exc)
                    self.errors[key] = str(exc)
            if self.errors:
                loop.call_later(RETRY_LISTEN_S, self.dirty.set)

    async def _forward(
        self, key: ListenKey, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        route = self.routes.get(key)
        backend = self.balancer.pick(key, route.backends if route else ())
        if backend is None:
            _reset(writer)
            return
        try:
            host = loopback_twin(backend.address, self.pod_loopback)
            upstream = asyncio.open_connection(host, backend.port)
            up_reader, up_writer = await asyncio.wait_for(upstream, CONNECT_TIMEOUT_S)
        except (TimeoutError, OSError):
            _reset(writer)
            return
        await splice(reader, writer, up_reader, up_writer)

    async def close(self) -> None:
        for server in self.listeners.values():
            server.close()
        self.listeners.clear()

    # -- admin ----------------------------------------------------------------------------------
    def snapshot(self) -> list[dict[str, Any]]:
        return [
            {
                "service": route.service,
                "port": route.port_name,
                "listen": f"{route.cluster_ip}:{route.port}",
                "listening": key in self.listeners,
                "error": self.errors.get(key),
                "backends": [str(b) for b in route.backends],
                "changedAt": self.changed_at.get(key),
            }
            for key, route in sorted(self.routes.items())
        ]

    async def admin(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """A minimal HTTP/1.1 responder for ``/healthz`` and ``/routes``."""
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
            path = head.split(b" ", 2)[1].decode()
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, IndexError):
            writer.close()
            return
        if path == "/healthz":
            ok = {SERVICES, SLICES} <= self.synced
            status, body = ("200 OK", b"ok") if ok else ("503 Service Unavailable", b"listing")
        elif path == "/routes":
            status, body = "200 OK", json.dumps(self.snapshot(), indent=1).encode()
        else:
            status, body = "404 Not Found", b"not found"
        writer.write(
            f"HTTP/1.1 {status}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body
        )
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        writer.close()


async def splice(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    up_reader: asyncio.StreamReader,
    up_writer: asyncio.StreamWriter,
) -> None:
    """Copy both ways until the backend's side ends (its answer is complete, or its process
    died) or either side fails; a client that only half-closes still gets the answer."""
    answer = asyncio.ensure_future(_pipe(up_reader, writer))
    request = asyncio.ensure_future(_pipe(reader, up_writer))
    try:
        done, _ = await asyncio.wait({answer, request}, return_when=asyncio.FIRST_COMPLETED)
        if answer not in done and request.exception() is None:
            await asyncio.wait({answer})
    finally:
        for task in (answer, request):
            task.cancel()
        await asyncio.gather(answer, request, return_exceptions=True)
        for w in (writer, up_writer):
            w.close()


async def _pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    while data := await src.read(CHUNK):
        dst.write(data)
        await dst.drain()
    if dst.can_write_eof():
        with contextlib.suppress(OSError):
            dst.write_eof()


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with a RST (linger 0), as a rejected connection looks to the client."""
    sock = writer.get_extra_info("socket")
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def run(kubeconfig: Path, pod_loopback: ipaddress.IPv4Network, admin: socket.socket) -> None:
    """Serve until SIGTERM or SIGINT; ``admin`` is a listening socket."""
    loop = asyncio.get_running_loop()
    proxy = ServiceProxy(pod_loopback)
    stopping = threading.Event()
    admin_server = await asyncio.start_server(proxy.admin, sock=admin)

    def deliver(kind: str, key: ObjectKey, record: Any) -> None:
        loop.call_soon_threadsafe(proxy.apply, kind, key, record)

    def replace(kind: str, records: dict[ObjectKey, Any]) -> None:
        loop.call_soon_threadsafe(proxy.replace, kind, records)

    start_watches(kubeconfig, deliver, replace, stopping)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    serving = asyncio.create_task(proxy.serve())
    try:
        await stop.wait()
    finally:
        stopping.set()
        serving.cancel()
        await proxy.close()
        admin_server.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Route each Service's ClusterIP:port to its ready endpoints."
    )
    parser.add_argument("--kubeconfig", type=Path, required=True)
    parser.add_argument("--pod-loopback", type=ipaddress.IPv4Network, required=True)
    parser.add_argument(
        "--admin-fd", type=int, required=True, help="a listening socket for /healthz and /routes"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    admin = socket.socket(fileno=args.admin_fd)
    asyncio.run(run(args.kubeconfig, args.pod_loopback, admin))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
