"""KServe V2 / Triton HTTP endpoints of the reference server."""

from __future__ import annotations

import time

from aiohttp import web

from mcp_refserver.model import ServerModel
from mcp_refserver.v2_tensors import (
    InjectedError,
    TensorError,
    encode_http_response,
    model_metadata,
    parse_http_infer,
    run_infer,
)

EXTENSIONS = ["binary_tensor_data", "statistics"]


def _err(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


class V2HttpHandlers:
    def __init__(self, model: ServerModel) -> None:
        self.model = model

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/v2", self.server_metadata),
            web.get("/v2/health/live", self.ok),
            web.get("/v2/health/ready", self.ok),
            web.get("/v2/models/stats", self.stats),
            web.get("/v2/models/{m}", self.metadata),
            web.get("/v2/models/{m}/versions/{v}", self.metadata),
            web.get("/v2/models/{m}/ready", self.ready),
            web.get("/v2/models/{m}/versions/{v}/ready", self.ready),
            web.get("/v2/models/{m}/stats", self.stats),
            web.get("/v2/models/{m}/versions/{v}/stats", self.stats),
            web.post("/v2/models/{m}/infer", self.infer),
            web.post("/v2/models/{m}/versions/{v}/infer", self.infer),
        ]

    def _known(self, request: web.Request) -> str | None:
        """None when the model (and version, if given) exist; else the error message."""
        c = self.model.config
        m, v = request.match_info.get("m", c.model), request.match_info.get("v", c.model_version)
        if m != c.model:
            return f"Request for unknown model: '{m}' is not found"
        if v != c.model_version:
            return f"Request for unknown model: '{m}' version {v} is not found"
        return None

    async def server_metadata(self, request: web.Request) -> web.Response:
        c = self.model.config
        return web.json_response(
            {"name": c.server_name, "version": c.server_version, "extensions": EXTENSIONS}
        )

    async def ok(self, request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def ready(self, request: web.Request) -> web.Response:
        return web.Response(status=400 if self._known(request) else 200)

    async def metadata(self, request: web.Request) -> web.Response:
        if (msg := self._known(request)) is not None:
            return _err(404, msg)
        c = self.model.config
        return web.json_response(model_metadata(c.model, c.model_version, c.server_name))

    async def stats(self, request: web.Request) -> web.Response:
        if (msg := self._known(request)) is not None:
            return _err(404, msg)
        c = self.model.config
        return web.json_response(self.model.stats.triton_json(c.model, c.model_version))

    async def infer(self, request: web.Request) -> web.Response:
        arrival = time.perf_counter_ns()
        if (msg := self._known(request)) is not None:
            return _err(404, msg)
        c = self.model.config
        try:
            req = parse_http_infer(
                await request.read(), request.headers.get("Inference-Header-Content-Length")
            )
            outputs = await run_infer(
                self.model, arrival, req.inputs, codec_ms=c.http_codec_ms, priority=req.priority
            )
        except TensorError as exc:
            return _err(400, str(exc))
        except InjectedError as exc:
            return _err(c.faults.error_status, str(exc))
        body, header_len = encode_http_response(c.model, c.model_version, req, outputs)
        headers = {"Content-Type": "application/json" if header_len is None else "application/octet-stream"}
        if header_len is not None:
            headers["Inference-Header-Content-Length"] = str(header_len)
        return web.Response(body=body, headers=headers)
