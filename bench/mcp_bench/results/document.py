"""The result document: what a run measured, in a form that can be checked, merged and diffed.

JSON is written canonically (sorted keys, no insignificant whitespace) and carries a CRC-32C of
the canonical bytes of everything else, so a shard result that was cut short or edited on its way
to the operator is rejected instead of merged. A CRC only catches accidents: a document can also
carry an HMAC-SHA256 under a key shared by its writer and its reader, and an ``origin`` (who wrote
it, for which run) that the signature covers, so a forged or copied document is told apart.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import datetime
from typing import Any, Literal

import google_crc32c
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mcp_bench.plan import RunPlan
from mcp_bench.records import ErrorKind
from mcp_bench.results.histogram import PERCENTILES, LatencyHistogram
from mcp_bench.saturation import SearchOutcome

SCHEMA_VERSION = "mcp-bench.result/v1"
# Metrics kept per level, in report order; all in milliseconds.
METRICS: tuple[str, ...] = ("e2e", "e2e_from_schedule", "ttft", "tpot", "itl", "schedule_lag")
# Per connection opened for a level (not per request, never in TTFT's figures): TCP connect and
# the TLS handshake, also in milliseconds.
CONNECTION_METRICS: tuple[str, ...] = ("connect", "tls")
Unavailable = Literal["unavailable"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PercentileTable(_Model):
    """Summary of one latency histogram, in milliseconds; figures are None when count is 0."""

    count: int = 0
    mean_ms: float | None = None
    min_ms: float | None = None
    max_ms: float | None = None
    p50_ms: float | None = None
    p90_ms: float | None = None
    p95_ms: float | None = None
    p99_ms: float | None = None
    p999_ms: float | None = None

    @classmethod
    def from_histogram(cls, hist: LatencyHistogram) -> PercentileTable:
        if not hist.count:
            return cls()
        p = hist.percentiles_ms(PERCENTILES)
        return cls(
            count=hist.count,
            mean_ms=hist.mean_ms(),
            min_ms=hist.min_ms(),
            max_ms=hist.max_ms(),
            p50_ms=p[50.0],
            p90_ms=p[90.0],
            p95_ms=p[95.0],
            p99_ms=p[99.0],
            p999_ms=p[99.9],
        )


class SloCheck(_Model):
    name: str
    target: float
    actual: float | None
    passed: bool
    detail: str = ""


class SloVerdict(_Model):
    """passed is None when no SLO was declared; no data for a declared SLO is a failure."""

    passed: bool | None = None
    checks: list[SloCheck] = Field(default_factory=list)


class EngineFingerprint(_Model):
    engine: str = "builtin"
    engine_version: str = ""
    client_name: str = "mcp-bench"
    client_version: str = ""
    server_name: str = ""
    server_version: str = ""
    python: str = ""
    hostname: str = ""


class TagResult(_Model):
    """The requests of one tag value in a level (one request class, one input shape).

    ``first_latency_ms`` is the latency of the first request sent with this value in the level
    (None when it failed): for a shape sweep, the first hit of a new shape."""

    sent: int = 0
    completed: int = 0
    failed: int = 0
    first_sent_unix_ns: int | None = None
    first_latency_ms: float | None = None
    latency: dict[str, PercentileTable] = Field(default_factory=dict)
    histograms: dict[str, str] = Field(default_factory=dict)

    def histogram(self, metric: str) -> LatencyHistogram | None:
        text = self.histograms.get(metric)
        return LatencyHistogram.decode(text) if text else None


class WorkerLoad(_Model):
    """What one client worker process of a level sent and what it cost the client: its CPU time
    against the level's wall time, and (open loop) its own schedule lag."""

    worker: int
    sent: int = 0
    cpu_s: float
    wall_s: float
    cpu_share: float
    lag_p99_ms: float | None = None


class ShardWindow(_Model):
    """When one shard measured a level (first measured send to last measured end, Unix ns) and
    the common start time it waited for, if a start barrier gave one."""

    shard: int | None = None
    start_unix_ns: int
    end_unix_ns: int
    start_at_unix_ns: int | None = None


class LevelResult(_Model):
    """One load level (a concurrency or a rate) as measured after warm-up."""

    index: int
    mode: Literal["closed", "open"]
    concurrency: int | None = None
    requested_rate: float | None = None
    achieved_rate: float | None = None
    started_at: datetime | None = None  # first measured send
    ended_at: datetime | None = None  # last measured end
    first_start_unix_ns: int | None = None
    last_end_unix_ns: int | None = None
    first_sent_unix_ns: int | None = None
    last_sent_unix_ns: int | None = None
    sent: int = 0
    completed: int = 0
    failed: int = 0
    dropped: int = 0
    late: int = 0
    errors: dict[ErrorKind, int] = Field(default_factory=dict)
    # the first failure's detail of each kind (what a count alone cannot say: why)
    error_examples: dict[ErrorKind, str] = Field(default_factory=dict)
    input_tokens: int = 0
    output_tokens: int = 0
    good: int = 0
    throughput_rps: float | None = None
    output_token_throughput: float | None = None
    goodput_rps: float | None = None
    latency: dict[str, PercentileTable] = Field(default_factory=dict)
    histograms: dict[str, str] = Field(default_factory=dict)
    stop_reason: str = ""
    # how connections were handled ("warm", "cold", "per-request"); None where the client
    # cannot say (its library owns the pool)
    connections: str | None = None
    # measured requests that waited for a connection opened for them (its connect time is in
    # their TTFT and e2e): none in a warm level whose pool held, every one per request
    new_connection_requests: int = 0
    stability: dict[str, Any] | None = None
    breaker: dict[str, Any] | None = None
    slo: SloVerdict = Field(default_factory=SloVerdict)
    telemetry: dict[str, Any] | Unavailable = "unavailable"
    server_metrics: dict[str, Any] | None = None
    shards: int = 1
    # per tag ("class", "shape") and value: counts, latency tables and histograms; None when untagged
    breakdown: dict[str, dict[str, TagResult]] | None = None
    # runs with several client processes: one entry per worker; and why the level was
    # client-bound (a client process, one or several, past the plan's client_bound)
    workers: list[WorkerLoad] | None = None
    client_bound: list[str] | None = None
    # a start barrier's common start time this level waited for (Unix ns); None without one
    start_at_unix_ns: int | None = None
    # merged shards: each shard's window, the share of the union of windows that every shard
    # shared, and why the level is no cluster-wide figure (windows overlapped too little)
    shard_windows: list[ShardWindow] | None = None
    overlap: float | None = None
    not_concurrent: str | None = None
    # output consistency (plan.consistency): probes answered during the level against their at-rest
    # answers, counts, mismatch rate, L2 max/P99 and the state (mcp_bench.results.consistency)
    consistency: dict[str, Any] | None = None

    def histogram(self, metric: str) -> LatencyHistogram | None:
        text = self.histograms.get(metric)
        return LatencyHistogram.decode(text) if text else None

    @property
    def level_label(self) -> str:
        if self.mode == "closed":
            return f"c={self.concurrency}"
        return f"r={self.requested_rate:g}/s"


class ResultDocument(_Model):
    schema_version: str = SCHEMA_VERSION
    started_at: datetime
    ended_at: datetime
    engine: EngineFingerprint
    plan: RunPlan
    levels: list[LevelResult]
    slo_passed: bool | None = None
    telemetry: dict[str, Any] | Unavailable = "unavailable"
    server_metrics: dict[str, Any] | None = None
    shards: int = 1
    shard_index: int | None = None
    notes: list[str] = Field(default_factory=list)
    # a saturation search (plan.search): every probe, the answer, the knee and why it stopped;
    # slo_passed then says whether some load met the SLO
    search: SearchOutcome | None = None
    # who wrote it and for which run (e.g. the operator's run UID, Job and pod), signed with the rest
    origin: dict[str, str] = Field(default_factory=dict)
    hmac_sha256: str | None = None
    crc32c: str | None = None

    @property
    def measured_anything(self) -> bool:
        return any(level.completed for level in self.levels)


class ChecksumMismatchError(ValueError):
    """The document's CRC-32C does not match its content (or it has none)."""


class DocumentFormatError(ValueError):
    """Text that is not a result document (bad JSON or wrong fields)."""


class SignatureMismatchError(ValueError):
    """A document that must be signed has no HMAC, or one made with another key or content."""


def _canonical(data: Any) -> bytes:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return text.encode("utf-8")


def _crc(data: dict[str, Any]) -> str:
    body = {k: v for k, v in data.items() if k != "crc32c"}
    return f"{google_crc32c.value(_canonical(body)):08x}"


def _hmac(data: dict[str, Any], key: bytes) -> str:
    body = {k: v for k, v in data.items() if k not in ("crc32c", "hmac_sha256")}
    return hmac.new(key, _canonical(body), hashlib.sha256).hexdigest()


def dumps_document(doc: ResultDocument, key: bytes | None = None) -> str:
    """Canonical JSON with ``crc32c`` over the canonical bytes of every other field; with ``key``,
    also ``hmac_sha256`` over the canonical bytes of everything but the two."""
    data = doc.model_dump(mode="json", exclude={"crc32c", "hmac_sha256"})
    if not data["origin"]:
        del data["origin"]  # documents without one read exactly as before
    if data["search"] is None:
        del data["search"]
    if key is not None:
        data["hmac_sha256"] = _hmac(data, key)
    data["crc32c"] = _crc(data)
    return _canonical(data).decode("utf-8")


def loads_document(text: str | bytes, key: bytes | None = None) -> ResultDocument:
    """Parse a document, rejecting it when the checksum is missing or does not match; with
    ``key``, also when it is not signed with that key."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DocumentFormatError(f"result document is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise DocumentFormatError("result document must be a JSON object")
    stated = data.get("crc32c")
    if not isinstance(stated, str):
        raise ChecksumMismatchError("result document has no crc32c field")
    actual = _crc(data)
    if stated.lower() != actual:
        raise ChecksumMismatchError(f"crc32c mismatch: document says {stated}, content gives {actual}")
    if key is not None:
        signature = data.get("hmac_sha256")
        if not isinstance(signature, str):
            raise SignatureMismatchError("result document is not signed (no hmac_sha256)")
        if not hmac.compare_digest(signature.lower(), _hmac(data, key)):
            raise SignatureMismatchError("hmac_sha256 does not match: not signed with the run's key")
    try:
        return ResultDocument.model_validate(data)
    except ValidationError as exc:
        raise DocumentFormatError(f"result document has wrong fields: {exc}") from exc
