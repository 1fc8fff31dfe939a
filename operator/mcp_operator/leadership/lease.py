"""The Lease record and the rules of taking it: pure, so they are tested without a cluster.

Expiry is judged the way client-go's leader election judges it: by how long *this* process has
seen the same record unchanged (a monotonic clock of its own), never by comparing the holder's
``renewTime`` with the local wall clock, so clock skew between nodes cannot hand the lease to a
second operator while the first still renews it.
"""

from __future__ import annotations

import datetime as dt
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


@dataclass(frozen=True)
class LeaseConfig:
    """Which Lease, who we are, and the timings (client-go's defaults: 15 s, 10 s, 2 s)."""

    name: str
    namespace: str
    identity: str
    duration_s: float = 15.0  # a standby takes over this long after the last renewal it saw
    renew_deadline_s: float = 10.0  # the leader stops once it has failed to renew for this long
    retry_period_s: float = 2.0  # how often the leader renews and a standby looks

    def __post_init__(self) -> None:
        if not self.name or not self.namespace or not self.identity:
            raise ValueError("the lease needs a name, a namespace and an identity")
        if not self.duration_s > self.renew_deadline_s > self.retry_period_s > 0:
            raise ValueError(
                "lease timings must satisfy duration > renew deadline > retry period > 0 "
                f"(got {self.duration_s}, {self.renew_deadline_s}, {self.retry_period_s})"
            )

    @classmethod
    def from_env(
        cls, *, name: str | None = None, namespace: str | None = None, identity: str | None = None
    ) -> LeaseConfig:
        env = os.environ
        return cls(
            name=name or env.get("MCP_LEASE_NAME") or "mcp-operator",
            namespace=namespace or env.get("MCP_LEASE_NAMESPACE") or own_namespace(),
            identity=identity or env.get("MCP_OPERATOR_IDENTITY") or env.get("POD_NAME") or own_identity(),
            duration_s=float(env.get("MCP_LEASE_DURATION_SECONDS", "15")),
            renew_deadline_s=float(env.get("MCP_LEASE_RENEW_DEADLINE_SECONDS", "10")),
            retry_period_s=float(env.get("MCP_LEASE_RETRY_PERIOD_SECONDS", "2")),
        )


def own_namespace() -> str:
    """The pod's namespace (downward API or the service account's), else ``default``."""
    found = os.environ.get("POD_NAMESPACE")
    if found:
        return found
    try:
        return SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or "default"
    except OSError:
        return "default"


def own_identity() -> str:
    """Outside a pod: host and process id, unique among the processes alive at one time."""
    return f"{socket.gethostname()}-{os.getpid()}"


@dataclass(frozen=True)
class Holder:
    """The part of a Lease that decides who leads; ``identity`` is empty once released."""

    identity: str
    duration_s: float
    renew_time: str
    acquire_time: str
    transitions: int
    resource_version: str

    @classmethod
    def from_lease(cls, lease: Mapping[str, Any]) -> Holder:
        spec = lease.get("spec") or {}
        return cls(
            identity=str(spec.get("holderIdentity") or ""),
            duration_s=float(spec.get("leaseDurationSeconds") or 0),
            renew_time=str(spec.get("renewTime") or ""),
            acquire_time=str(spec.get("acquireTime") or ""),
            transitions=int(spec.get("leaseTransitions") or 0),
            resource_version=str((lease.get("metadata") or {}).get("resourceVersion") or ""),
        )

    @property
    def version(self) -> tuple[str, str]:
        """What changes whenever the holder renews or another takes over."""
        return (self.identity, self.renew_time)


class Observation:
    """When this process first saw the current record, on its own monotonic clock."""

    def __init__(self) -> None:
        self._version: tuple[str, str] | None = None
        self._since = 0.0

    def see(self, holder: Holder, now: float) -> float:
        """Record ``holder`` as seen at ``now``; returns since when this record has been seen."""
        if holder.version != self._version:
            self._version, self._since = holder.version, now
        return self._since


def may_take(holder: Holder | None, identity: str, seen_since: float, now: float) -> bool:
    """Whether ``identity`` may write itself into the lease: there is none, it is released, it is
    ours already (a restarted container of the same pod), or its holder has not renewed it for a
    whole lease duration as this process has watched it."""
    if holder is None or holder.identity in ("", identity):
        return True
    return now - seen_since >= holder.duration_s


def micro_time(at: dt.datetime) -> str:
    """A ``MicroTime`` as the API server parses it (always six fractional digits, UTC)."""
    return at.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def held_spec(holder: Holder | None, identity: str, duration_s: float, now: dt.datetime) -> dict[str, Any]:
    """The Lease spec that says ``identity`` holds it as of ``now`` (a renewal keeps the acquire
    time; a takeover counts a transition)."""
    stamp = micro_time(now)
    ours = holder is not None and holder.identity == identity
    transitions = 0 if holder is None else holder.transitions + (0 if ours else 1)
    return {
        "holderIdentity": identity,
        "leaseDurationSeconds": max(1, round(duration_s)),
        "acquireTime": holder.acquire_time if ours and holder is not None and holder.acquire_time else stamp,
        "renewTime": stamp,
        "leaseTransitions": transitions,
    }


def released_spec(holder: Holder, now: dt.datetime) -> dict[str, Any]:
    """The Lease spec of a clean exit: no holder, so a standby takes it at its next look."""
    stamp = micro_time(now)
    return {
        "leaseDurationSeconds": 1,
        "acquireTime": stamp,
        "renewTime": stamp,
        "leaseTransitions": holder.transitions,
    }
