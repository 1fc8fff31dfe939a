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
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

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

    @field_validator("ttft_ms", "tpot_ms", "infer_ms", mode="before")
    @classmethod
    def _shorthand(cls, v: object) -> object:
        """Accept ``"uniform:20:80"`` style strings and bare numbers as well as mappings."""
        if isinstance(v, str | int | float):
            return parse_distribution(v)
        return v
