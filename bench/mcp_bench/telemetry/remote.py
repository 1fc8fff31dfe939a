"""Run observer that reads the serving GPUs from node-level samplers (``mcp-bench gpu-sampler``).

Each level's wall-clock window is sent to every sampler the plan names
(``observe.gpu_samplers``) once the level ends; its summary lands in ``level.server_metrics``
under ``gpu-sampler:<node>``, labelled ``role: serving`` (the shard's own telemetry in
``level.telemetry`` is the load generator's). A sampler that does not answer is ``unavailable``
with the reason, in every level, never left out. At the end of the run the observer tells each
sampler it is done, so the sampler stops once every shard has.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Sequence
from typing import Any

import aiohttp

from mcp_bench import dialguard
from mcp_bench.engines.base import RunObserver
from mcp_bench.plan import RunPlan
from mcp_bench.results.aggregate import LevelMeta
from mcp_bench.results.document import LevelResult, ResultDocument

ROLE = "serving"
PREFIX = "gpu-sampler:"
READY_WAIT_S = 60.0  # a sampler pod may still be starting when the shard does
TIMEOUT_S = 10.0


async def _get_json(session: aiohttp.ClientSession, url: str) -> dict[str, Any]:
    async with session.get(url) as resp:
        if resp.status != 200:
            raise RuntimeError(f"GET {url} answered {resp.status}: {(await resp.text())[:200]}")
        body = await resp.json()
        if not isinstance(body, dict):
            raise RuntimeError(f"GET {url}: not a JSON object")
        return body


class ServingGpuObserver(RunObserver):
    """Per level, one summary per node-level sampler in ``level.server_metrics``."""

    def __init__(
        self, urls: Sequence[str], ready_wait_s: float = READY_WAIT_S, timeout_s: float = TIMEOUT_S
    ) -> None:
        self.urls = [u.rstrip("/") for u in urls]
        if len(set(self.urls)) != len(self.urls):
            raise ValueError(f"gpu samplers given twice: {self.urls}")
        self.ready_wait_s = ready_wait_s
        self.timeout_s = timeout_s
        self.client = uuid.uuid4().hex
        self.names: dict[str, str] = {u: f"{PREFIX}{u}" for u in self.urls}  # by node once known
        self.down: dict[str, str] = {}  # url -> why it is unavailable for the whole run
        self._start_unix_ns: int | None = None
        self._end_unix_ns: int | None = None

    def _session(self) -> aiohttp.ClientSession:
        # the operator's target policy, on each address connected to (none for a plain run)
        connector = aiohttp.TCPConnector(socket_factory=dialguard.socket_factory(dialguard.active_rule()))
        return aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout_s), connector=connector)

    async def _wait_ready(self, session: aiohttp.ClientSession, url: str) -> None:
        deadline = time.monotonic() + self.ready_wait_s
        last = ""
        while True:
            try:
                health = await _get_json(session, f"{url}/healthz")
                if health.get("node"):
                    self.names[url] = f"{PREFIX}{health['node']}"
                return
            except (aiohttp.ClientError, TimeoutError, RuntimeError) as exc:
                last = f"{type(exc).__name__}: {exc}"
            if time.monotonic() >= deadline:
                self.down[url] = (
                    f"the sampler at {url} did not answer within {self.ready_wait_s:g} s ({last})"
                )
                return
            await asyncio.sleep(0.5)

    async def run_started(self, plan: RunPlan) -> None:
        async with self._session() as session:
            await asyncio.gather(*(self._wait_ready(session, u) for u in self.urls))

    async def level_started(self, plan: RunPlan, meta: LevelMeta) -> None:
        self._start_unix_ns = time.time_ns()

    async def _window(self, session: aiohttp.ClientSession, url: str, query: str) -> dict[str, Any]:
        if url in self.down:
            return {"role": ROLE, "status": "unavailable", "reason": self.down[url], "source": url}
        try:
            return {**await _get_json(session, f"{url}/window?{query}"), "source": url}
        except (aiohttp.ClientError, TimeoutError, RuntimeError, ValueError) as exc:
            return {
                "role": ROLE,
                "status": "unavailable",
                "reason": f"{type(exc).__name__}: {exc}",
                "source": url,
            }

    async def _read(self, result: LevelResult, settled_unix_ns: int | None) -> None:
        if self._start_unix_ns is None or self._end_unix_ns is None:
            return
        query = f"start_unix_ns={self._start_unix_ns}&end_unix_ns={self._end_unix_ns}"
        if settled_unix_ns is not None:
            query += f"&settled_unix_ns={settled_unix_ns}"
        async with self._session() as session:
            answers = await asyncio.gather(*(self._window(session, u, query) for u in self.urls))
        metrics = dict(result.server_metrics or {})
        for url, answer in zip(self.urls, answers, strict=True):
            metrics[self.names[url]] = answer
        result.server_metrics = metrics

    async def level_finished(self, plan: RunPlan, result: LevelResult) -> None:
        self._end_unix_ns = time.time_ns()
        if plan.observe.settle_s <= 0:
            await self._read(result, None)

    async def level_settled(self, plan: RunPlan, result: LevelResult) -> None:
        await self._read(result, time.time_ns())  # the memory after the settle wait too

    async def run_finished(self, doc: ResultDocument) -> None:
        async with self._session() as session:
            for url in self.urls:
                if url in self.down:
                    continue
                try:
                    async with session.post(f"{url}/done?client={self.client}") as resp:
                        await resp.read()
                except (aiohttp.ClientError, TimeoutError):
                    pass  # the sampler stops at its deadline anyway
