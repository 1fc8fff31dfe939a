"""A mounted ConfigMap the server reloads in place (``--config-dir``), and ``GET /config``,
which says which content this server runs: the hash the config-consistency check computes for
the ConfigMap (``mcp_checks.api.config_hash``), the server's name (the pod's, in a cluster) and
how often it reloaded. A drill's in-place hot update (``configHotUpdate`` with ``rollout:
false``) is timed by it: the kubelet rewrites the mounted files, the server notices within a
poll and answers with the new hash, no pod restarted.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

from mcp_checks.api import ConfigContent, config_hash

POLL_S = 0.2


def read_dir(directory: Path) -> dict[str, str]:
    """The ConfigMap's keys as the kubelet writes them: one regular file per key (the kubelet's
    own ``..data`` links and hidden entries are not keys)."""
    return {
        path.name: path.read_text(encoding="utf-8", errors="replace")
        for path in sorted(directory.iterdir())
        if path.is_file() and not path.name.startswith(".")
    }


@dataclass
class ConfigDir:
    """What the server loaded from its mounted ConfigMap, and when."""

    directory: Path
    config_map: str
    server: str
    hash: str = ""
    reloads: int = 0
    loaded_at: float = 0.0
    _seen: dict[str, str] = field(default_factory=dict)

    def load(self) -> bool:
        """Read the directory; True when its content changed since the last load."""
        data = read_dir(self.directory)
        if data == self._seen and self.hash:
            return False
        self._seen = data
        self.hash = config_hash([ConfigContent("ConfigMap", self.config_map, data, {})])
        self.loaded_at = time.time()
        return True

    async def follow(self) -> None:
        """Reload whenever the files change, until cancelled."""
        while True:
            await asyncio.sleep(POLL_S)
            with contextlib.suppress(OSError):
                if self.load():
                    self.reloads += 1

    async def answer(self, request: web.Request) -> web.Response:
        return web.json_response(
            {"server": self.server, "hash": self.hash, "reloads": self.reloads, "loadedAt": self.loaded_at}
        )


def serve_config_dir(app: web.Application, config: ConfigDir) -> None:
    """``GET /config``, and the reload loop for as long as the app runs."""
    config.load()
    app.add_routes([web.get("/config", config.answer)])

    async def reloading(app: web.Application) -> AsyncIterator[None]:
        task = asyncio.create_task(config.follow())
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    app.cleanup_ctx.append(reloading)
