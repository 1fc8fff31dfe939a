"""What the xDS sync check reads and what it is asked: sources, the spec, and the per-proxy,
per-type states that every source is reduced to, so one verdict rule serves all sources."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

from mcp_checks.dialhooks import OPEN, DialHooks
from mcp_checks.redact import redact_text, redact_url

XDS_TYPES = ("LDS", "RDS", "CDS", "EDS")

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


@dataclass(frozen=True)
class ProxyReport:
    proxy_id: str
    types: tuple[TypeStatus, ...]


@dataclass(frozen=True)
class SourceAnswer:
    """One source's answer reduced to proxy reports; ``unreachable`` or ``malformed`` say why
    there are none (never read as 'all synced')."""

    source: str
    proxies: tuple[ProxyReport, ...] = ()
    unreachable: str = ""
    malformed: str = ""

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

    ``expected_proxies``: node IDs the target's pods should have (None: every proxy the sources
    know; an empty tuple means the selector matched nothing and is Inconclusive).
    ``expected_version``: when set, a proxy ACKed on another version counts as stale.
    ``changed_at``: epoch seconds of the last config change the caller made; staleness cannot
    have begun earlier, so a long-synced proxy is not failed at once when the config changes.
    ``grace_s``: stale for less than this is Warn, longer is Fail. ``timeout_s``: for one call.
    """

    sources: tuple[XdsSource, ...]
    expected_proxies: tuple[str, ...] | None = None
    types: tuple[str, ...] = XDS_TYPES
    expected_version: str | None = None
    changed_at: float | None = None
    grace_s: float = 30.0
    timeout_s: float = 5.0
    name: str = "xds-sync"
    dial: DialHooks = field(default=OPEN, compare=False)  # the operator's target policy


class MalformedAnswer(ValueError):
    """A source answered with something that is not the shape it documents."""
