"""A verdict and its event, written together or not at all (issue 37).

The event a verdict announces is decided before the verdict is written (:func:`verdict_event`)
and the verdict's own status patch carries it (``status.verdictEvent``); kopf posts it after the
write, from its queue, as any event, so the hot path makes no API call more. An operator that dies
between the write and kopf's post leaves a verdict without its event: a new leader adopting the
decided gate (kopf's resume) looks for the recorded event among those the API server holds and,
where it is missing, posts it itself (:class:`VerdictEvents`), stamped with the verdict's time and
named after the gate, its uid, that time and the reason, so that a second try meets a 409.

Events are looked up by one LIST per process (per namespace when the operator is namespaced),
made at the operator's start (:meth:`VerdictEvents.prime`), or on the first need where it was
not. An event is matched by its gate's uid, its reason and message, and its time: the same text
is posted again by a later verdict, and an old one does not stand in for a new one. The API
server keeps an event for an hour by default (``--event-ttl``): a record older than
:data:`WINDOW_S` is not posted again, since its event may have been posted and expired.

No kopf here: the resume handler hands in the gate and its status.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

from mcp_checks.api import RunVerdict
from mcp_common.tolerant import tolerant

from .. import kube, metrics
from ..api.common import API_VERSION, REPORTING_COMPONENT
from ..api.readiness import KIND, VerdictEventRecord
from ..conditions import parse_time
from ..redact import event_text

log = logging.getLogger(__name__)

WINDOW_S = 50 * 60  # a record older than this is not posted again: the API server's --event-ttl is 1 h
SLACK_S = 5.0  # an event stamped this much before its verdict's time is still its event
PAGE = 100  # events a page of the LIST: a small one, parsed and let go before the next
SELECTOR = f"involvedObject.kind={KIND}"
MAX_NAME = 200  # of the gate's name in an event's name (a DNS subdomain: 253 at most)

Key = tuple[str, str, str]  # the gate's uid, the event's reason and its message


@dataclass(frozen=True)
class VerdictEvent:
    """The event a verdict announces, as the round says it."""

    warning: bool
    reason: str
    message: str  # as the round says it: the event and the record carry ``event_text`` of it

    def record(self, at: str) -> VerdictEventRecord:
        """What ``status.verdictEvent`` holds: the event as posted, at the verdict's time."""
        kind: Literal["Normal", "Warning"] = "Warning" if self.warning else "Normal"
        return VerdictEventRecord(type=kind, reason=self.reason, message=event_text(self.message), time=at)


def verdict_event(verdict: RunVerdict, every: bool, previous_ready: str | None) -> VerdictEvent | None:
    """The event ``verdict`` announces: every verdict of a round that announces each (``every``),
    else only one that changes Ready; None when it is no news."""
    changed = previous_ready != ("True" if verdict.ready else "False")
    if not (every or changed):
        return None
    message = f"verdict {verdict.outcome.value}: {verdict.message}"
    if verdict.ready:
        return VerdictEvent(False, "Ready", message)
    return VerdictEvent(True, verdict.reason, message)


def recorded(status: Mapping[str, Any]) -> VerdictEventRecord | None:
    """``status.verdictEvent``, or None where there is none (or none readable)."""
    raw = status.get("verdictEvent")
    if not isinstance(raw, Mapping):
        return None
    try:
        return tolerant(VerdictEventRecord, raw)
    except ValidationError:
        return None


def seconds(stamp: Any) -> float | None:
    """An RFC 3339 time (an event's or a record's) as Unix seconds; None when it is none."""
    parsed = parse_time(stamp) if isinstance(stamp, str) and stamp else None
    if parsed is None:
        return None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)).timestamp()


def event_name(name: str, uid: str, record: VerdictEventRecord) -> str:
    """The event's name: the gate's, and a digest of what makes this verdict's event one."""
    digest = hashlib.sha256(f"{uid}/{record.time}/{record.reason}".encode()).hexdigest()[:16]
    return f"{name[:MAX_NAME].rstrip('.-')}.{digest}"


def event_body(namespace: str, name: str, uid: str, record: VerdictEventRecord) -> dict[str, Any]:
    """The recorded event as the API server stores kopf's, stamped with the verdict's time."""
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": event_name(name, uid, record), "namespace": namespace},
        "type": record.type,
        "reason": record.reason,
        "message": event_text(record.message),
        "involvedObject": {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "name": name,
            "namespace": namespace,
            "uid": uid,
        },
        "firstTimestamp": record.time,
        "lastTimestamp": record.time,
        "count": 1,
        "source": {"component": REPORTING_COMPONENT},
        "reportingComponent": REPORTING_COMPONENT,
    }


def seen_events(items: list[Any], seen: dict[Key, float] | None = None) -> dict[Key, float]:
    """The newest time of each (uid, reason, message) among listed events (added to ``seen``)."""
    seen = {} if seen is None else seen
    for item in items:
        involved = item.get("involvedObject") or {}
        stamps = [seconds(item.get(k)) for k in ("eventTime", "firstTimestamp", "lastTimestamp")]
        at = max((s for s in stamps if s is not None), default=None)
        if at is None:
            continue
        key = (str(involved.get("uid") or ""), str(item.get("reason") or ""), str(item.get("message") or ""))
        seen[key] = max(at, seen.get(key, at))
    return seen


def _page(namespace: str | None, token: str | None, **options: Any) -> dict[str, Any]:
    """One page of the LIST, read as JSON rather than built into the client's models."""
    options.update(field_selector=SELECTOR, limit=PAGE, _preload_content=False)
    if token:
        options["_continue"] = token
    api = kube.thin_core()
    if namespace is None:
        response = api.list_event_for_all_namespaces(**options)
    else:
        response = api.list_namespaced_event(namespace, **options)
    page: dict[str, Any] = json.loads(response.data)  # read whole: the connection goes back to the pool
    return page


async def list_events(namespace: str | None) -> dict[Key, float]:
    """Our resources' events, every page (``namespace`` None: in every namespace)."""
    seen: dict[Key, float] = {}
    token: str | None = None
    while True:
        page = await kube.call(_page, namespace, token)
        seen_events(page.get("items") or [], seen)  # a page at a time: only the keys are kept
        token = (page.get("metadata") or {}).get("continue") or None
        if token is None:
            return seen


async def _listed(scope: str | None) -> dict[Key, float] | None:
    where = "every namespace" if scope is None else f"namespace {scope}"
    try:
        seen = await list_events(scope)
    except Exception as exc:
        log.warning("could not list the events in %s (%s): lost verdict events stay lost", where, exc)
        return None
    log.debug("listed the events of %d verdicts in %s", len(seen), where)
    return seen


class VerdictEvents:
    """The recorded verdict events this process made sure of (one per operator process, in its
    runtime): one LIST of events per scope, shared by every gate that resumes."""

    def __init__(self, namespaces: tuple[str, ...] = ()) -> None:
        self.namespaces = namespaces  # the operator's ``--namespace`` list: a LIST in each
        self.restored = 0
        self._listed: dict[str | None, dict[Key, float] | None] = {}
        self._locks: dict[str | None, asyncio.Lock] = {}

    @property
    def namespaced(self) -> bool:
        """The operator watches named namespaces only (none: every namespace, one LIST)."""
        return bool(self.namespaces)

    async def prime(self) -> None:
        """List the events now, at the operator's start, before kopf hands over any gate: a
        resume that waited for the LIST would keep its whole body (and kopf's views of it) alive
        meanwhile, 1,000 of them at once over a backlog (after a restart, 142 MiB with the LIST
        on the first resume against 120 with it at start)."""
        for scope in self.namespaces or (None,):
            await self._seen(scope)

    async def _seen(self, scope: str | None) -> dict[Key, float] | None:
        """The events of ``scope``, listed once (None: the LIST failed; not tried again)."""
        async with self._locks.setdefault(scope, asyncio.Lock()):
            if scope not in self._listed:
                self._listed[scope] = await _listed(scope)
            return self._listed[scope]

    async def ensure(
        self, namespace: str, name: str, uid: str, status: Mapping[str, Any], now: float | None = None
    ) -> bool:
        """The gate's recorded verdict event exists: posted here where the API server has none
        (True). Never raises: the verdict stands whatever happens to its event."""
        record = recorded(status)
        at = None if record is None else seconds(record.time)
        if record is None or at is None or (time.time() if now is None else now) - at > WINDOW_S:
            return False
        seen = await self._seen(namespace if self.namespaced else None)
        key = (uid, record.reason, record.message)
        if seen is None or seen.get(key, float("-inf")) >= at - SLACK_S:
            return False
        body = event_body(namespace, name, uid, record)
        try:
            created = await kube.create_or_exists(kube.thin_core().create_namespaced_event, namespace, body)
        except Exception as exc:
            log.warning("%s/%s: could not post its verdict's lost event (%s)", namespace, name, exc)
            return False
        seen[key] = at
        if created:
            self.restored += 1
            metrics.VERDICT_EVENTS_RESTORED.inc()
            log.info(
                "%s/%s: its verdict's event (%s %s of %s) was lost; posted it (%d restored by this process)",
                namespace,
                name,
                record.type,
                record.reason,
                record.time,
                self.restored,
            )
        return created
