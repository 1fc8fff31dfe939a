"""The V2 model the reference server hosts, and its tensor codec for HTTP (JSON + binary extension).

The model takes one numeric tensor ``INPUT0`` and returns ``OUTPUT0`` (the input, echoed)
and ``OUTPUT1`` (the sum of all its elements, shape ``[1]``). Its compute time is the
configured ``infer_ms``; the arithmetic itself is trivial, which is the point.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from tritonclient.utils import np_to_triton_dtype, triton_to_np_dtype

from mcp_refserver.drift import drift_of
from mcp_refserver.media import counts_of, tensor_images
from mcp_refserver.model import Fault, ServerModel, sleep_until

INPUT = "INPUT0"
ECHO = "OUTPUT0"
SUM = "OUTPUT1"
NUMERIC = ("FP16", "FP32", "FP64", "INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64")


class TensorError(ValueError):
    """A request the model cannot take; answered with 400 / INVALID_ARGUMENT."""


def model_metadata(name: str, version: str, platform: str) -> dict[str, Any]:
    return {
        "name": name,
        "versions": [version],
        "platform": platform,
        "inputs": [{"name": INPUT, "datatype": "FP32", "shape": [-1, -1]}],
        "outputs": [
            {"name": ECHO, "datatype": "FP32", "shape": [-1, -1]},
            {"name": SUM, "datatype": "FP32", "shape": [1]},
        ],
    }


def compute(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    if INPUT not in inputs:
        raise TensorError(f"expected input {INPUT!r}, got {sorted(inputs)}")
    x = inputs[INPUT]
    return {ECHO: x, SUM: np.array([x.sum()], dtype=x.dtype)}


def to_array(datatype: str, shape: list[int], data: bytes | list[Any]) -> np.ndarray:
    """Build one input tensor from raw little-endian bytes or a (possibly nested) JSON list."""
    if datatype not in NUMERIC:
        raise TensorError(f"datatype {datatype!r} not supported (numeric only)")
    dtype = np.dtype(triton_to_np_dtype(datatype))
    try:
        if isinstance(data, bytes | bytearray | memoryview):
            arr = np.frombuffer(data, dtype=dtype.newbyteorder("<"))
        else:
            arr = np.asarray(data, dtype=dtype).ravel()
        return arr.reshape(shape)
    except (ValueError, TypeError) as exc:
        raise TensorError(f"tensor of shape {shape} and type {datatype}: {exc}") from exc


@dataclass(slots=True)
class HttpInferRequest:
    id: str
    inputs: dict[str, np.ndarray]
    binary_outputs: dict[str, bool]  # requested output -> send as binary
    requested: list[str]
    priority: int = 0  # request parameter "priority", as Triton reads it


def parse_http_infer(body: bytes, header_length: str | None) -> HttpInferRequest:
    """Decode a V2 HTTP infer body, with or without the binary tensor extension."""
    try:
        split = int(header_length) if header_length else len(body)
        header = json.loads(body[:split])
    except (ValueError, UnicodeDecodeError) as exc:
        raise TensorError(f"request header is not JSON: {exc}") from exc
    if not isinstance(header, dict) or not isinstance(header.get("inputs"), list):
        raise TensorError("request must be an object with an 'inputs' list")
    offset = split
    inputs: dict[str, np.ndarray] = {}
    for item in header["inputs"]:
        try:
            name, datatype, shape = item["name"], item["datatype"], list(item["shape"])
        except (KeyError, TypeError) as exc:
            raise TensorError(f"input needs name, datatype and shape: {item!r}") from exc
        size = (item.get("parameters") or {}).get("binary_data_size")
        if size is not None:
            data: bytes | list[Any] = body[offset : offset + int(size)]
            offset += int(size)
        elif "data" in item:
            data = item["data"]
        else:
            raise TensorError(f"input {name!r} has neither 'data' nor 'binary_data_size'")
        inputs[name] = to_array(datatype, shape, data)
    default_binary = bool((header.get("parameters") or {}).get("binary_data_output", False))
    outs = header.get("outputs") or [{"name": ECHO}, {"name": SUM}]
    binary = {
        o["name"]: bool((o.get("parameters") or {}).get("binary_data", default_binary))
        for o in outs
        if isinstance(o, dict) and "name" in o
    }
    for name in binary:
        if name not in (ECHO, SUM):
            raise TensorError(f"unknown output {name!r}")
    priority = (header.get("parameters") or {}).get("priority", 0)
    if not isinstance(priority, int) or isinstance(priority, bool):
        raise TensorError("parameter 'priority' must be an integer")
    return HttpInferRequest(
        id=str(header.get("id", "")),
        inputs=inputs,
        binary_outputs=binary,
        requested=list(binary),
        priority=priority,
    )


def encode_http_response(
    model: str, version: str, req: HttpInferRequest, outputs: dict[str, np.ndarray]
) -> tuple[bytes, int | None]:
    """The response body and, when any output is binary, the JSON header length."""
    header_outputs: list[dict[str, Any]] = []
    blobs: list[bytes] = []
    for name in req.requested:
        arr = outputs[name]
        out: dict[str, Any] = {
            "name": name,
            "datatype": np_to_triton_dtype(arr.dtype),
            "shape": list(arr.shape),
        }
        if req.binary_outputs[name]:
            raw = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<")).tobytes()
            out["parameters"] = {"binary_data_size": len(raw)}
            blobs.append(raw)
        else:
            out["data"] = arr.ravel().tolist()
        header_outputs.append(out)
    header: dict[str, Any] = {"model_name": model, "model_version": version, "outputs": header_outputs}
    if req.id:
        header["id"] = req.id
    head = json.dumps(header, separators=(",", ":")).encode()
    if not blobs:
        return head, None
    return head + b"".join(blobs), len(head)


class InjectedError(RuntimeError):
    """The fault model chose to fail this request."""


async def run_infer(
    model: ServerModel,
    arrival_ns: int,
    inputs: dict[str, np.ndarray],
    *,
    codec_ms: float = 0.0,
    priority: int = 0,
) -> dict[str, np.ndarray]:
    """Queue, wait the modelled compute time, compute; shared by the HTTP and gRPC front ends.

    Trap knobs: the dynamic batcher (trap 3) instead of one execution per request; ``codec_ms``
    of decoding and encoding inside the service (trap 11); a first-hit compile per new input shape
    (trap 12); ``priority`` when the server serves strictly by priority (trap 8)."""
    outputs = compute(inputs)  # validate before queueing: a bad request is not a served one
    images = tensor_images(inputs)
    counts_of(model).record("v2", images)
    image_ns = round(images.images * model.config.image_ms * 1e6)
    plan = model.plan()
    if plan.fault is Fault.ERROR:
        model.stats.record_rejected()
        raise InjectedError("injected error")
    if plan.fault is Fault.STALL:
        await sleep_until(arrival_ns + round(model.config.faults.stall_s * 1e9))
    if model.batcher is not None:
        await model.batcher.run(arrival_ns, plan.infer_ns + image_ns)
        return outputs
    strict = model.config.priority == "strict"
    async with model.serve(arrival_ns, priority if strict else 0) as svc:
        start = svc.start_ns
        drifting = drift_of(model).now(model.running + model.waiting)
        if model.shapes.penalty_ns > 0:
            shape = tuple(sorted((name, tuple(arr.shape)) for name, arr in inputs.items()))
            if await model.shapes.ensure(shape):
                start = time.perf_counter_ns()
        half_ns = round(codec_ms * 1e6 / 2)
        if half_ns:
            svc.input_ns = svc.output_ns = half_ns
            await model.waker.sleep_until(start + half_ns)
            start += half_ns
        await model.waker.sleep_until(start + plan.infer_ns + image_ns)
        if half_ns:
            await model.waker.sleep_until(start + plan.infer_ns + image_ns + half_ns)
    return drift_of(model).outputs(outputs, drifting)
