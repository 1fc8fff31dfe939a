"""An HTTP server on loopback that answers GETs with canned objects (404 for the rest), behind a
kubeconfig of its own: the commands that read one object (``kubectl mcp board``, ``mcp-operator
report``) exercised through the real Kubernetes client without a cluster."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml


class CannedApi(BaseHTTPRequestHandler):
    objects: dict[str, dict[str, Any]] = {}

    def do_GET(self) -> None:
        obj = self.objects.get(self.path)
        body = obj or {"kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404}
        data = json.dumps(body).encode()
        self.send_response(200 if obj else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *_: Any) -> None:
        pass


@contextmanager
def canned_api(kubeconfig: Path, namespace: str = "demo") -> Iterator[type[CannedApi]]:
    """Serve ``CannedApi.objects`` (emptied first) and write a kubeconfig whose current context
    points at it, in ``namespace``."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), CannedApi)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{server.server_port}"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u", "namespace": namespace}}],
        "current-context": "ctx",
    }
    kubeconfig.write_text(yaml.safe_dump(config))
    CannedApi.objects = {}
    try:
        yield CannedApi
    finally:
        server.shutdown()
        server.server_close()
