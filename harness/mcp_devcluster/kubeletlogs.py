"""The local kubelet's HTTPS endpoint for container logs, as a real kubelet serves them.

The API server answers ``kubectl logs`` (``pods/log``) by asking the kubelet of the pod's node
for ``GET /containerLogs/{namespace}/{pod}/{container}`` at the Node's advertised address and
``daemonEndpoints.kubeletEndpoint.Port``, with a client certificate of its own. This server
answers from the file each container's stdout and stderr go to (``containers``), and requires a
client certificate issued by the cluster CA. A real kubelet also asks the API server whether
that client may read the node's logs (a SubjectAccessReview); here every certificate of the
cluster CA may, and the only client is the API server.

Query parameters honoured: ``tailLines`` (the last N lines) and ``limitBytes`` (at most N bytes
from the start of what is left), in the kubelet's order. ``follow``, ``timestamps``,
``sinceSeconds``, ``sinceTime`` and ``previous`` are ignored: the log is served as it stands,
without stamps (the local runner neither records them nor restarts a container).
"""

from __future__ import annotations

import asyncio
import collections
import re
import ssl
import threading
from collections.abc import Callable
from pathlib import Path

from aiohttp import web

# namespace, pod and container names are DNS labels or subdomains: nothing else reaches a path
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
PodDirs = Callable[[str, str], Path | None]  # (namespace, pod) -> its directory, None if unknown


def server_ssl_context(cert: Path, key: Path, client_ca: Path) -> ssl.SSLContext:
    """Serve with ``cert``; accept only clients with a certificate issued by ``client_ca``."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(client_ca))
    ctx.load_cert_chain(str(cert), str(key))
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def _count(request: web.Request, name: str) -> int | None:
    value = request.query.get(name)
    if value is None:
        return None
    if not value.isdigit():
        raise web.HTTPBadRequest(text=f"{name} must be a non-negative integer, not {value!r}")
    return int(value)


def read_log(path: Path, tail_lines: int | None, limit_bytes: int | None) -> bytes:
    """The log's bytes: its last ``tail_lines`` lines, then at most ``limit_bytes`` of them."""
    with path.open("rb") as log:
        if tail_lines is None:
            data = log.read() if limit_bytes is None else log.read(limit_bytes)
        else:
            data = b"".join(collections.deque(log, maxlen=tail_lines)) if tail_lines else b""
    return data if limit_bytes is None else data[:limit_bytes]


def log_app(pod_dirs: PodDirs) -> web.Application:
    """The application: one route, answered from the container's log file under its pod's
    directory (``<container>.log``); 404 for a pod or container this kubelet has no log of."""

    async def container_logs(request: web.Request) -> web.Response:
        namespace, pod = request.match_info["namespace"], request.match_info["pod"]
        container = request.match_info["container"]
        if not all(_NAME.match(n) for n in (namespace, pod, container)):
            raise web.HTTPBadRequest(text="not a namespace, pod and container name")
        tail_lines, limit_bytes = _count(request, "tailLines"), _count(request, "limitBytes")
        directory = await asyncio.to_thread(pod_dirs, namespace, pod)
        path = directory / f"{container}.log" if directory is not None else None
        if path is None or not path.is_file():
            raise web.HTTPNotFound(text=f"no log of container {container} of pod {namespace}/{pod} here")
        body = await asyncio.to_thread(read_log, path, tail_lines, limit_bytes)
        return web.Response(body=body, content_type="text/plain", charset="utf-8")

    app = web.Application()
    app.router.add_get("/containerLogs/{namespace}/{pod}/{container}", container_logs)
    return app


def serve_in_thread(app: web.Application, ctx: ssl.SSLContext, host: str = "127.0.0.1") -> int:
    """Serve ``app`` over TLS on an event loop of its own thread (the kubelet's loops are
    threads); returns the port it bound (chosen by the kernel, so two kubelets never collide)."""
    bound: list[int] = []
    failed: list[BaseException] = []
    ready = threading.Event()

    async def start() -> None:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, host, 0, ssl_context=ctx)
        await site.start()
        bound.append(int(runner.addresses[0][1]))

    def run() -> None:
        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(start())
        except BaseException as exc:
            failed.append(exc)
            ready.set()
            return
        ready.set()
        loop.run_forever()

    threading.Thread(target=run, daemon=True, name="container-logs").start()
    ready.wait()
    if failed:
        raise failed[0]
    return bound[0]
