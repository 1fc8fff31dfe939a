"""Configuration of the reference server: its latency model, capacity and fault knobs.

The latency model is the ground truth of accuracy tests, so it is simple and exact:

* a request first waits in a FIFO queue until one of ``capacity`` service slots is free
  (``capacity=0``: no limit, no queueing);
* in service it waits ``ttft_ms`` (drawn per request) and emits its first token, then one
  token every ``tpot_ms`` (drawn per request, the same gap for all its tokens) until it has
  emitted ``max_tokens`` tokens (``default_max_tokens`` when the request names none);
* emission instants are absolute deadlines from the start of service, so sleep overshoot does
  not accumulate: token *i* (0-based) leaves at ``start + ttft + i * tpot``.

Hence, for one request, server-side: TTFT = queue + ttft, TPOT = tpot, e2e = queue + ttft +
(n - 1) * tpot. V2 ``infer`` requests use ``infer_ms`` as their compute time.

Faults are drawn per request with the given probabilities (seeded), in this order: error,
stall, close mid-stream, malformed chunk, truncated stream.

Trap knobs reproduce the hidden latency traps the diagnosis looks for (``mcp-bench diagnose``);
every one is off by default, so the model above is unchanged unless one is set:

* ``batch_max_size``/``batch_delay_ms`` (trap 3, V2 infer): a dynamic batcher that holds a request
  until the batch is full or the delay since its first request ran out, then executes the batch
  once (``infer_ms``); Triton's statistics count the hold as queue time, one execution per batch.
* ``kv_blocks``/``kv_block_tokens``/``kv_fragmentation`` (trap 6, OpenAI streams): a paged KV cache;
  a request holds ceil(tokens / block) blocks, growing as it generates; when a block cannot be had
  the request is preempted (``vllm:num_preemptions_total``), gives its blocks back, waits for room
  and recomputes its prefix (``ttft_ms`` again). ``kv_fragmentation`` is the share of the cache no
  allocation can use although it counts as free, so preemptions happen with usage well below 100%.
* ``priority`` (trap 8): ``strict`` serves waiting requests by their ``priority`` field first
  (lower first, as vLLM), arrival order within one priority; ``fifo`` ignores it.
* ``instances``/``instance_weights`` (trap 10): model instances, each with ``capacity`` slots; a
  request goes to an instance drawn by weight (seeded; equal weights by default). Per-instance
  busy time is exposed as ``mcp_refserver_instance_busy_seconds_total{instance}`` and the simulated
  ``nv_gpu_utilization`` of each instance's GPU becomes its busy share since the previous scrape.
* ``http_codec_ms``/``grpc_codec_ms`` (trap 11, V2 infer): time spent decoding the input and
  encoding the output (half each) inside the request's service, counted as Triton's compute_input
  and compute_output.
* ``shape_penalty_ms``/``shape_bucket_tokens`` (trap 12): the first request of every new input
  shape (OpenAI: prompt length rounded up to the bucket; V2: the input tensor shapes) "compiles"
  for this long inside its service; requests of the same shape arriving meanwhile wait for it.
  Counted in ``mcp_refserver_shape_compiles_total``.
* ``drift_above_inflight``/``drift_scale``/``drift_token_share`` (output consistency): a request
  that finds more than N requests in the server answers with changed tokens, logprobs and V2
  float outputs (``mcp_refserver.drift``); off by default, when answers depend on the request only.
* ``image_ms``: per image a request carries (chat ``image_url`` parts, V2 tensors of rank 3 or 4),
  added before its first token (OpenAI) or to its compute (V2); images are counted either way
  (``mcp_refserver_images_total``, ``/debug/media``).

Every HTTP request is counted in ``mcp_refserver_http_requests_total{path,code}`` (the route's
path, so the label stays bounded): the server's side of a retry-amplification measurement.
``max_inflight`` sheds load: a request on a work path (anything but /health, /metrics, /version)
that finds that many already in progress is answered 503 at once, as an overloaded server or its
gateway does; clients that retry such answers without backoff turn an overload into a storm.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from mcp_bench.workload import Distribution, FixedDist, parse_distribution


class Faults(BaseModel):
    """Probabilities of each injected fault, for bad-input tests."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    error_rate: float = Field(default=0.0, ge=0, le=1)  # answer error_status before any body
    error_status: int = Field(default=500, ge=400, le=599)
    stall_rate: float = Field(default=0.0, ge=0, le=1)  # hold the request for stall_s (client timeouts)
    stall_s: float = Field(default=30.0, gt=0)
    close_rate: float = Field(default=0.0, ge=0, le=1)  # abort the connection mid-stream
    malformed_rate: float = Field(default=0.0, ge=0, le=1)  # send a chunk that is not JSON
    truncate_rate: float = Field(default=0.0, ge=0, le=1)  # end the stream cleanly without [DONE]
    fault_after_tokens: int = Field(default=1, ge=0)  # tokens sent before a mid-stream fault


class RefServerConfig(BaseModel):
    """Everything the reference server does is set here (CLI flags map one-to-one)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str = "127.0.0.1"
    port: int = Field(default=0, ge=0, le=65535)
    grpc_port: int | None = Field(default=None, ge=0, le=65535)  # None: no gRPC server
    model: str = "refmodel"
    model_version: str = "1"
    server_name: str = "mcp-refserver"
    server_version: str = "0.1.0"
    # a mounted ConfigMap reloaded in place, and its name (for the hash GET /config answers)
    config_dir: str | None = None
    config_map: str = "config"
    ttft_ms: Distribution = FixedDist(value=20.0)
    tpot_ms: Distribution = FixedDist(value=5.0)
    infer_ms: Distribution = FixedDist(value=1.0)
    default_max_tokens: int = Field(default=16, ge=1)
    tokens_per_chunk: int = Field(default=1, ge=1)  # tokens sent together in one stream chunk
    send_usage: bool = True  # False: ignore stream_options.include_usage, as some servers do
    capacity: int = Field(default=0, ge=0)  # 0: unlimited
    seed: int = 0
    faults: Faults = Faults()
    # Simulated GPU gauges for /metrics (constant; no GPU is involved).
    gpu_utilization: float = Field(default=0.5, ge=0, le=1)
    gpu_memory_used_bytes: int = Field(default=8 * 2**30, ge=0)
    gpu_memory_total_bytes: int = Field(default=80 * 2**30, ge=1)
    # The memory model (see mcp_refserver.memory): borrowed per request in service, kept per request.
    gpu_memory_per_request_bytes: int = Field(default=0, ge=0, le=2**34)
    leak_bytes_per_request: int = Field(default=0, ge=0, le=2**26)
    # Trap knobs (see the module docstring); the defaults switch every one off.
    batch_max_size: int = Field(default=1, ge=1, le=1024)
    batch_delay_ms: float = Field(default=0.0, ge=0, le=60_000)
    kv_blocks: int = Field(default=0, ge=0)  # 0: no KV-cache model
    kv_block_tokens: int = Field(default=16, ge=1)
    kv_fragmentation: float = Field(default=0.0, ge=0, lt=1)
    priority: Literal["fifo", "strict"] = "fifo"
    instances: int = Field(default=1, ge=1, le=64)
    instance_weights: tuple[float, ...] | None = None
    http_codec_ms: float = Field(default=0.0, ge=0, le=60_000)
    grpc_codec_ms: float = Field(default=0.0, ge=0, le=60_000)
    shape_penalty_ms: float = Field(default=0.0, ge=0, le=600_000)
    shape_bucket_tokens: int = Field(default=1, ge=1)
    max_inflight: int = Field(default=0, ge=0)  # 0: no shedding
    # per image received (chat image parts, V2 image tensors): added before the first token or to
    # V2 compute, so a test sees in the latency that the images arrived (mcp_refserver.media)
    image_ms: float = Field(default=0.0, ge=0, le=60_000)
    # output drift under load (mcp_refserver.drift): a request that finds more than this many requests
    # in the server gets changed tokens, logprobs and V2 float outputs; None: answers never drift
    drift_above_inflight: int | None = Field(default=None, ge=0)
    drift_scale: float = Field(default=0.01, ge=0, le=100)  # relative noise on logprobs and float outputs
    drift_token_share: float = Field(default=0.25, ge=0, le=1)  # share of a drifting answer's tokens replaced

    @field_validator("instance_weights", mode="before")
    @classmethod
    def _weights(cls, v: object) -> object:
        """Accept ``"8,1,1,1"`` as well as a list."""
        if isinstance(v, str):
            return tuple(float(x) for x in v.split(",") if x.strip())
        return v

    @model_validator(mode="after")
    def _consistent(self) -> RefServerConfig:
        weights = self.instance_weights
        if weights is not None:
            if len(weights) != self.instances:
                raise ValueError(f"instance_weights needs one weight per instance ({self.instances})")
            if any(w < 0 for w in weights) or not any(w > 0 for w in weights):
                raise ValueError("instance_weights must be >= 0 with at least one > 0")
        if self.kv_blocks and int(self.kv_blocks * (1 - self.kv_fragmentation)) < 1:
            raise ValueError("kv_fragmentation leaves no usable KV block")
        return self

    @field_validator("ttft_ms", "tpot_ms", "infer_ms", mode="before")
    @classmethod
    def _shorthand(cls, v: object) -> object:
        """Accept ``"uniform:20:80"`` style strings and bare numbers as well as mappings."""
        if isinstance(v, str | int | float):
            return parse_distribution(v)
        return v
