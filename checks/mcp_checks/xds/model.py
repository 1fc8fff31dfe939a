"""What the xDS sync check reads and what it is asked: sources, the spec, and the per-proxy,
per-type states that every source is reduced to, so one verdict rule serves all sources."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

from mcp_checks.defaults import XDS_GRACE_S, XDS_TIMEOUT_S, XDS_TYPES
from mcp_checks.dialhooks import OPEN, DialHooks
from mcp_common.redact import redact_text, redact_url

# type URL (v3) -> short xDS name; what CSDS and istiod's xDS-form syncz report
TYPE_URLS = {
    "type.googleapis.com/envoy.config.listener.v3.Listener": "LDS",
    "type.googleapis.com/envoy.config.route.v3.RouteConfiguration": "RDS",
    "type.googleapis.com/envoy.config.cluster.v3.Cluster": "CDS",
    "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment": "EDS",
}

SourceKind = Literal["csds", "syncz", "envoy_admin"]


class SyncState(StrEnum):
    """One proxy's state for one xDS type; ordered from best to worst by ``STATE_RANK``."""

    SYNCED = "synced"
    UNKNOWN = "unknown"
    STALE = "stale"
    REJECTED = "rejected"


STATE_RANK = {SyncState.SYNCED: 0, SyncState.UNKNOWN: 1, SyncState.STALE: 2, SyncState.REJECTED: 3}
MAX_TEXT = 512  # characters of a source's text kept (an error detail, a version, a node ID)


def clip(text: str, limit: int = MAX_TEXT) -> str:
    """``text`` cut to ``limit`` characters, saying how long it was: a hostile or broken source
    (a 2 MB NACK text) must not blow up status, events or the CLI's JSON."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text):,} characters, cut)"


@dataclass(frozen=True)
class TypeStatus:
    """``since`` is when this state began (epoch seconds) where the source says so; ``detail``
    is the client's error text for a rejection, or the raw status the source used."""

    xds_type: str
    state: SyncState
    version: str = ""
    since: float | None = None
    detail: str = ""
    missing: bool = False  # the source says the resource does not exist
    rejections: int = 0  # rejected updates the source counted (Envoy's update_rejected)
    reason: str = ""  # why an UNKNOWN state is unknown, CamelCase (empty: TypeNotReported)

    def __post_init__(self) -> None:
        object.__setattr__(self, "version", clip(self.version))
        object.__setattr__(self, "detail", clip(self.detail))


@dataclass(frozen=True)
class ProxyReport:
    proxy_id: str
    types: tuple[TypeStatus, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "proxy_id", clip(self.proxy_id))


@dataclass(frozen=True)
class SourceAnswer:
    """One source's answer reduced to proxy reports; ``unreachable`` or ``malformed`` say why
    there are none (never read as 'all synced')."""

    source: str
    proxies: tuple[ProxyReport, ...] = ()
    unreachable: str = ""
    malformed: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "unreachable", clip(self.unreachable))
        object.__setattr__(self, "malformed", clip(self.malformed))

    @property
    def answered(self) -> bool:
        return not self.unreachable and not self.malformed


@dataclass(frozen=True)
class XdsSource:
    """Where to read sync state: ``csds`` is a gRPC ``host:port`` (a control plane's or a client's
    CSDS service, plaintext); ``syncz`` and ``envoy_admin`` are base URLs (``http://host:port``)."""

    kind: SourceKind
    address: str

    @property
    def label(self) -> str:
        """The source as shown: its address without userinfo or a secret query value."""
        return f"{self.kind}:{redact_url(self.address)}"

    def scrub(self, text: str) -> str:
        """``text`` (an error a call raised) without the address's credentials: the address is
        shown redacted wherever the text quotes it, and any other URL or query in it too (a
        ``host:port`` with userinfo is no URL that ``redact_text`` could find on its own)."""
        return redact_text(text.replace(self.address, redact_url(self.address)))


@dataclass(frozen=True)
class XdsSyncSpec:
    """The xDS sync assertion.

    Who should be there comes from outside the answers judged: ``expected_proxies`` (node IDs
    the caller named, or the ready pods of a workload; an empty tuple means the selector matched
    nothing) and/or ``min_proxies`` (how many must be reported; 0 allows none). With neither,
    what the sources report is judged but cannot pass (``NoExpectedProxies``): it is the answer
    vouching for itself, and a dead client simply leaves it.
    ``expected_version``: when set, a proxy ACKed on another version (or on none) is not synced.
    ``changed_at``: epoch seconds of the last config change the caller made; staleness cannot
    have begun earlier, so a long-synced proxy is not failed at once when the config changes.
    ``grace_s``: stale for less than this has not converged yet (Inconclusive), longer is Fail.
    ``timeout_s``: for one call.
    """

    sources: tuple[XdsSource, ...]
    expected_proxies: tuple[str, ...] | None = None
    min_proxies: int | None = None
    types: tuple[str, ...] = XDS_TYPES
    expected_version: str | None = None
    changed_at: float | None = None
    grace_s: float = XDS_GRACE_S
    timeout_s: float = XDS_TIMEOUT_S
    name: str = "xds-sync"
    dial: DialHooks = field(default=OPEN, compare=False)  # the operator's target policy


class MalformedAnswer(ValueError):
    """A source answered with something that is not the shape it documents."""
