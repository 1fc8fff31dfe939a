"""KServe V2 / Triton gRPC front end, on tritonclient's bundled generated protos and ``grpc.aio``."""

from __future__ import annotations

import time
from typing import Any

import grpc
import numpy as np
from google.protobuf import json_format
from tritonclient.grpc import service_pb2 as pb
from tritonclient.grpc import service_pb2_grpc as pb_grpc
from tritonclient.utils import np_to_triton_dtype

from mcp_refserver.model import ServerModel
from mcp_refserver.v2_http import EXTENSIONS
from mcp_refserver.v2_tensors import InjectedError, TensorError, model_metadata, run_infer, to_array

_CONTENT_FIELD = {
    "FP32": "fp32_contents",
    "FP64": "fp64_contents",
    "INT8": "int_contents",
    "INT16": "int_contents",
    "INT32": "int_contents",
    "INT64": "int64_contents",
    "UINT8": "uint_contents",
    "UINT16": "uint_contents",
    "UINT32": "uint_contents",
    "UINT64": "uint64_contents",
}


def _priority(request: Any) -> int:
    """The request's "priority" parameter (tritonclient sends it as uint64_param); 0 when absent."""
    if "priority" not in request.parameters:
        return 0
    param = request.parameters["priority"]
    kind = param.WhichOneof("parameter_choice")
    return int(getattr(param, kind)) if kind in ("int64_param", "uint64_param") else 0


class V2Servicer(pb_grpc.GRPCInferenceServiceServicer):
    def __init__(self, model: ServerModel) -> None:
        self.model = model

    async def _check_model(self, name: str, version: str, context: grpc.aio.ServicerContext) -> None:
        c = self.model.config
        if name != c.model or version not in ("", c.model_version):
            await context.abort(
                grpc.StatusCode.NOT_FOUND, f"Request for unknown model: '{name}' is not found"
            )

    async def ServerLive(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return pb.ServerLiveResponse(live=True)

    async def ServerReady(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return pb.ServerReadyResponse(ready=True)

    async def ModelReady(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        c = self.model.config
        return pb.ModelReadyResponse(
            ready=request.name == c.model and request.version in ("", c.model_version)
        )

    async def ServerMetadata(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        c = self.model.config
        return pb.ServerMetadataResponse(name=c.server_name, version=c.server_version, extensions=EXTENSIONS)

    async def ModelMetadata(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        await self._check_model(request.name, request.version, context)
        c = self.model.config
        return json_format.ParseDict(
            model_metadata(c.model, c.model_version, c.server_name), pb.ModelMetadataResponse()
        )

    async def ModelStatistics(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        c = self.model.config
        if request.name:
            await self._check_model(request.name, request.version, context)
        doc = self.model.stats.triton_json(c.model, c.model_version)
        return json_format.ParseDict(doc, pb.ModelStatisticsResponse(), ignore_unknown_fields=True)

    async def ModelInfer(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        arrival = time.perf_counter_ns()
        await self._check_model(request.model_name, request.model_version, context)
        c = self.model.config
        try:
            inputs = {}
            for i, t in enumerate(request.inputs):
                if i < len(request.raw_input_contents):
                    data: bytes | list[Any] = request.raw_input_contents[i]
                else:
                    field = _CONTENT_FIELD.get(t.datatype)
                    if field is None:
                        raise TensorError(f"datatype {t.datatype!r} not supported (numeric only)")
                    data = list(getattr(t.contents, field))
                inputs[t.name] = to_array(t.datatype, list(t.shape), data)
            priority = _priority(request)
            outputs = await run_infer(
                self.model, arrival, inputs, codec_ms=c.grpc_codec_ms, priority=priority
            )
        except TensorError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except InjectedError as exc:
            await context.abort(grpc.StatusCode.INTERNAL, str(exc))
        names = [o.name for o in request.outputs] or list(outputs)
        resp = pb.ModelInferResponse(model_name=c.model, model_version=c.model_version, id=request.id)
        for name in names:
            if name not in outputs:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"unknown output {name!r}")
            arr = outputs[name]
            out = resp.outputs.add()
            out.name, out.datatype = name, np_to_triton_dtype(arr.dtype)
            out.shape.extend(arr.shape)
            resp.raw_output_contents.append(
                np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<")).tobytes()
            )
        return resp


async def start_grpc(model: ServerModel, host: str, port: int) -> tuple[grpc.aio.Server, int]:
    """Start the gRPC server on the running loop; returns it and the bound port."""
    server = grpc.aio.server()
    pb_grpc.add_GRPCInferenceServiceServicer_to_server(V2Servicer(model), server)
    bound = server.add_insecure_port(f"{host}:{port}")
    await server.start()
    return server, bound
