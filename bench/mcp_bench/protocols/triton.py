"""Triton / KServe V2 inference over HTTP and gRPC, through ``tritonclient``'s asyncio clients.

Inputs are built once, at :meth:`TritonClient.open`, either from the plan's payload options or
from the model's metadata (``-1`` dimensions become ``batch_size`` for the first and ``dim``
for the others; data is seeded random), so per-request cost is the protocol's, not ours.

Plan ``payload.options`` understood here::

    model_version: "1"               # default: let the server pick
    inputs: [{name, datatype, shape, data?}]   # default: from model metadata
    outputs: [OUTPUT0, ...]          # default: whatever the server returns
    binary_data: null                # HTTP binary tensor extension: true, false (JSON tensors), or
                                     # null: use it when the server lists "binary_tensor_data"
    batch_size: 1                    # for a leading -1 dimension
    dim: 16                          # for any other -1 dimension
    seed: 0                          # random input data

A record's ``end_ns`` is when the whole response has been received and decoded; there is no
stream, so ``first_token_ns`` stays None. Errors: a non-2xx HTTP answer (or a gRPC status the
server sent) -> HTTP_STATUS, with ``status`` holding the HTTP code (or the gRPC code number);
an answer that does not decode or lacks a requested output -> MALFORMED; gRPC UNAVAILABLE
-> CONNECT when no connection could be made, else DISCONNECTED; gRPC DEADLINE_EXCEEDED ->
TIMEOUT; aiohttp failures as the plain HTTP client classifies them.
"""

from __future__ import annotations

import asyncio
import random
from time import perf_counter_ns
from typing import TYPE_CHECKING, Any

import aiohttp
import grpc
import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from tritonclient.utils import InferenceServerException, triton_to_np_dtype

from mcp_bench import dialguard
from mcp_bench.protocols import register_protocol
from mcp_bench.protocols.http_aiohttp import classify_error
from mcp_bench.records import ErrorKind, RequestPayload, RequestRecord

if TYPE_CHECKING:
    from mcp_bench.plan import RunPlan

_DETAIL_MAX = 300


class InputSpec(BaseModel):
    """One input tensor; ``data`` (flat or nested list) is optional, seeded random otherwise."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    datatype: str
    shape: list[int]
    data: list[Any] | None = None


class TritonOptions(BaseModel):
    """The V2 part of ``plan.payload.options``; unknown keys fail with their name."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model_version: str = ""
    inputs: list[InputSpec] | None = None
    outputs: list[str] | None = None
    binary_data: bool | None = None
    batch_size: int = Field(default=1, ge=1)
    dim: int = Field(default=16, ge=1)
    seed: int = 0


def strip_scheme(url: str) -> str:
    """tritonclient wants ``host:port`` (and an optional path), never a scheme."""
    for scheme in ("http://", "https://", "grpc://"):
        if url.startswith(scheme):
            url = url[len(scheme) :]
    return url.rstrip("/")


def make_array(spec: InputSpec, rng: random.Random) -> np.ndarray:
    """The tensor for one input: its given data, or seeded random values of its type and shape."""
    if spec.datatype == "BYTES":
        dtype: Any = np.object_
    else:
        dtype = triton_to_np_dtype(spec.datatype)
        if dtype is None:
            raise ValueError(f"input {spec.name!r}: unknown datatype {spec.datatype!r}")
    if any(d < 0 for d in spec.shape):
        raise ValueError(f"input {spec.name!r}: shape {spec.shape} still has a variable dimension")
    if spec.data is not None:
        return np.asarray(spec.data, dtype=dtype).reshape(spec.shape)
    count = int(np.prod(spec.shape)) if spec.shape else 1
    gen = np.random.default_rng(rng.randrange(2**32))
    if spec.datatype == "BYTES":
        flat: np.ndarray = np.array([b"mcp-bench"] * count, dtype=np.object_)
    elif spec.datatype == "BOOL":
        flat = gen.integers(0, 2, count).astype(bool)
    elif np.issubdtype(np.dtype(dtype), np.integer):
        flat = gen.integers(0, 100, count).astype(dtype)
    else:
        flat = gen.random(count).astype(dtype)
    return flat.reshape(spec.shape)


def specs_from_metadata(meta: dict[str, Any], opts: TritonOptions) -> list[InputSpec]:
    """Concrete input specs from V2 model metadata, resolving ``-1`` dimensions."""
    specs = []
    for item in meta.get("inputs", []):
        shape = [int(d) for d in item["shape"]]
        shape = [(opts.batch_size if i == 0 else opts.dim) if d < 0 else d for i, d in enumerate(shape)]
        specs.append(InputSpec(name=item["name"], datatype=item["datatype"], shape=shape))
    if not specs:
        raise ValueError(f"model metadata lists no inputs: {meta}")
    return specs


def _classify_triton(exc: InferenceServerException, grpc_mode: bool) -> tuple[ErrorKind, int | None]:
    status = exc.status() or ""
    if not grpc_mode:
        return (ErrorKind.HTTP_STATUS, int(status)) if status.isdigit() else (ErrorKind.OTHER, None)
    code = next((c for c in grpc.StatusCode if str(c) == status), None)
    number = None if code is None else int(code.value[0])
    if code is grpc.StatusCode.DEADLINE_EXCEEDED:
        return ErrorKind.TIMEOUT, number
    if code is grpc.StatusCode.UNAVAILABLE:
        msg = (exc.message() or "").lower()
        connect = "connect" in msg or "refused" in msg or "no address" in msg
        return (ErrorKind.CONNECT if connect else ErrorKind.DISCONNECTED), number
    if code is None:
        return ErrorKind.OTHER, None
    return ErrorKind.HTTP_STATUS, number


def numeric_outputs(result: Any) -> dict[str, dict[str, Any]]:
    """Every numeric output of an infer answer (HTTP or gRPC), as flat float values and a shape,
    for the consistency probes; outputs that are not numbers (BYTES) are left out."""
    response = result.get_response()
    if isinstance(response, dict):
        names = [str(o.get("name")) for o in response.get("outputs", []) if isinstance(o, dict)]
    else:
        names = [o.name for o in response.outputs]
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        arr = result.as_numpy(name)
        if arr is None or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
            continue
        out[name] = {"values": arr.astype(np.float64).ravel().tolist(), "shape": list(arr.shape)}
    return out


def _channel_args(tgrpc: Any, authority: str) -> list[tuple[str, Any]]:
    """tritonclient's own channel defaults (``channel_args`` replaces them all), the name as the
    authority of a channel that dials a pinned address, and no proxy from the environment."""
    keepalive = tgrpc.KeepAliveOptions()
    return [
        ("grpc.max_send_message_length", tgrpc.MAX_GRPC_MESSAGE_SIZE),
        ("grpc.max_receive_message_length", tgrpc.MAX_GRPC_MESSAGE_SIZE),
        ("grpc.keepalive_time_ms", keepalive.keepalive_time_ms),
        ("grpc.keepalive_timeout_ms", keepalive.keepalive_timeout_ms),
        ("grpc.keepalive_permit_without_calls", keepalive.keepalive_permit_without_calls),
        ("grpc.http2.max_pings_without_data", keepalive.http2_max_pings_without_data),
        ("grpc.default_authority", authority.split("/", 1)[0]),
        ("grpc.enable_http_proxy", 0),  # no grpc_proxy/http(s)_proxy: the target is dialled itself
    ]


async def _guard_http(client: Any, rule: dialguard.AddressRule, limit: int) -> None:
    """tritonclient's HTTP client builds its aiohttp session itself and takes no connector: its
    session is replaced by one whose every connection the rule checks (nothing was sent on the
    first). A tritonclient without that session cannot be held to the rule, and says so."""
    old = getattr(client, "_stub", None)
    if not isinstance(old, aiohttp.ClientSession):
        raise RuntimeError("this tritonclient's HTTP client cannot be held to the target policy")
    connector = aiohttp.TCPConnector(limit=limit, socket_factory=dialguard.socket_factory(rule))
    client._stub = aiohttp.ClientSession(connector=connector, timeout=old.timeout, auto_decompress=False)
    client._conn = connector
    await old.close()


class TritonClient:
    """A :class:`~mcp_bench.records.ProtocolClient` for V2 ``infer`` over HTTP or gRPC."""

    def __init__(
        self,
        url: str,
        model: str,
        *,
        use_grpc: bool = False,
        timeout_s: float = 30.0,
        max_connections: int = 100,
        options: TritonOptions | None = None,
    ) -> None:
        self.url = strip_scheme(url)
        self.model = model
        self.use_grpc = use_grpc
        self.timeout_s = timeout_s
        self.max_connections = max_connections
        self.opts = options or TritonOptions()
        self._client: Any = None
        self._inputs: list[Any] = []
        self._outputs: list[Any] | None = None
        self.input_specs: list[InputSpec] = []
        self.binary_data = False
        self._mod: Any = None
        self._built: dict[str, Any] = {}  # a payload tensor's key -> its encoded input, built once

    @classmethod
    def from_plan(cls, plan: RunPlan, max_connections: int) -> TritonClient:
        return cls(
            plan.url,
            plan.model,
            use_grpc=plan.backend == "triton-grpc",
            timeout_s=plan.request_timeout_s,
            max_connections=max_connections,
            options=TritonOptions.model_validate(plan.payload.options),
        )

    async def open(self) -> None:
        """Connect, and build the input tensors (from options or model metadata) once."""
        rule = dialguard.active_rule()
        if self.use_grpc:
            import tritonclient.grpc.aio as tgrpc

            # gRPC would resolve the name again itself: with a rule it dials the address checked here
            pinned = self.url if rule is None else await dialguard.grpc_target(rule, self.url)
            args = _channel_args(tgrpc, self.url)
            self._client = tgrpc.InferenceServerClient(url=pinned, channel_args=args)
            mod: Any = tgrpc
        else:
            import tritonclient.http.aio as thttp

            self._client = thttp.InferenceServerClient(
                url=self.url, conn_limit=self.max_connections, conn_timeout=self.timeout_s
            )
            if rule is not None:
                await _guard_http(self._client, rule, self.max_connections)
            mod = thttp
        self._mod = mod
        if not self.use_grpc:
            if self.opts.binary_data is None:
                meta = await self._client.get_server_metadata()
                self.binary_data = "binary_tensor_data" in meta.get("extensions", [])
            else:
                self.binary_data = self.opts.binary_data
        specs = self.opts.inputs
        if specs is None:
            meta = await self._metadata()
            specs = specs_from_metadata(meta, self.opts)
        self.input_specs = list(specs)
        rng = random.Random(self.opts.seed)
        self._inputs = []
        for spec in specs:
            arr = make_array(spec, rng)
            self._inputs.append(self._input(spec.name, spec.datatype, arr))
        if self.opts.outputs is not None:
            if self.use_grpc:
                self._outputs = [mod.InferRequestedOutput(n) for n in self.opts.outputs]
            else:
                self._outputs = [
                    mod.InferRequestedOutput(n, binary_data=self.binary_data) for n in self.opts.outputs
                ]

    def _input(self, name: str, datatype: str, arr: np.ndarray) -> Any:
        inp = self._mod.InferInput(name, list(arr.shape), datatype)
        if self.use_grpc:
            inp.set_data_from_numpy(arr)
        else:
            inp.set_data_from_numpy(arr, binary_data=self.binary_data)
        return inp

    def inputs_for(self, payload: RequestPayload) -> list[Any]:
        """The client's inputs, with those the payload brings (image tensors) in place of, or
        beside, the ones of the same name; each payload tensor is encoded once and reused."""
        if not payload.tensors:
            return self._inputs
        extra = []
        for t in payload.tensors:
            if t.key not in self._built:
                self._built[t.key] = self._input(t.name, t.datatype, t.array)
            extra.append(self._built[t.key])
        names = {t.name for t in payload.tensors}
        return [i for i in self._inputs if i.name() not in names] + extra

    async def _metadata(self) -> dict[str, Any]:
        if self.use_grpc:
            meta: dict[str, Any] = await self._client.get_model_metadata(
                self.model, self.opts.model_version, as_json=True
            )
            return meta
        result: dict[str, Any] = await self._client.get_model_metadata(self.model, self.opts.model_version)
        return result

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

    async def send(self, payload: RequestPayload) -> RequestRecord:
        client = self._client
        if client is None:
            raise RuntimeError("TritonClient.open() was not called")
        kwargs: dict[str, Any] = {"model_version": self.opts.model_version, "outputs": self._outputs}
        if self.use_grpc:
            kwargs["client_timeout"] = self.timeout_s
        elif not self.binary_data:
            # tritonclient sends no Content-Type; servers built on FastAPI (MLServer) need it for JSON.
            kwargs["headers"] = {"Content-Type": "application/json"}
        rec = RequestRecord(sent_ns=perf_counter_ns(), end_ns=0, input_tokens=payload.input_tokens)
        try:
            result = await client.infer(self.model, self.inputs_for(payload), **kwargs)
            rec.end_ns = perf_counter_ns()
        except asyncio.CancelledError:
            raise
        except InferenceServerException as exc:
            rec.end_ns = perf_counter_ns()
            rec.error, rec.status = _classify_triton(exc, self.use_grpc)
            rec.error_detail = f"{exc.status()}: {exc.message()}"[:_DETAIL_MAX]
            return rec
        except Exception as exc:
            rec.end_ns = perf_counter_ns()
            kind = classify_error(exc)
            rec.error = (
                ErrorKind.MALFORMED if isinstance(exc, ValueError) and kind is ErrorKind.OTHER else kind
            )
            rec.error_detail = f"{type(exc).__name__}: {exc}"[:_DETAIL_MAX]
            return rec
        rec.status = None if self.use_grpc else 200
        for name in self.opts.outputs or []:
            if result.as_numpy(name) is None:
                rec.error = ErrorKind.MALFORMED
                rec.error_detail = f"response lacks requested output {name!r}"
                break
        if payload.capture and rec.error is None:
            rec.output = {"tensors": numeric_outputs(result)}
        return rec

    async def fingerprint(self) -> dict[str, str]:
        """``GET /v2`` (or ServerMetadata): name, version and extensions as the server reports them."""
        try:
            if self.use_grpc:
                meta = await self._client.get_server_metadata(as_json=True)
            else:
                meta = await self._client.get_server_metadata()
        except asyncio.CancelledError:
            raise
        except Exception:
            return {"server_name": "", "server_version": ""}
        return {
            "server_name": str(meta.get("name", "")),
            "server_version": str(meta.get("version", "")),
            "extensions": ",".join(map(str, meta.get("extensions", []))),
        }


register_protocol("triton-http", TritonClient.from_plan)
register_protocol("triton-grpc", TritonClient.from_plan)
