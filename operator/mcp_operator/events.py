"""Kubernetes events for our resources.

kopf's ``info``/``warn`` helpers obey the posting level, which is set to WARNING so kopf's
own per-handler chatter stays out of ``kubectl describe``; our events go through
``kopf.event`` so they are always posted, and every message is redacted first: an event is
readable by anyone who may list events in the namespace.

A verdict's event is posted by :func:`post_named` instead, before the verdict is written and
under a name of its own: kopf's poster sends its queue in the background, so an operator that
stops between the write and the send would leave a verdict no event ever told of.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Mapping
from typing import Any, cast

import kopf
from kubernetes.client.exceptions import ApiException

from . import kube
from .redact import redact_text

# a handler's Body, or the object as read from the API (kopf reads only its kind and metadata)
Subject = kopf.Body | Mapping[str, Any]


def normal(body: Subject, reason: str, message: str) -> None:
    kopf.event(cast(kopf.Body, body), type="Normal", reason=reason, message=redact_text(message)[:1024])


def warning(body: Subject, reason: str, message: str) -> None:
    kopf.event(cast(kopf.Body, body), type="Warning", reason=reason, message=redact_text(message)[:1024])


# what kopf's event poster is told to sign with (handlers.startup): both kinds of event read alike
REPORTING_COMPONENT = "mcp-operator"


def event_name(object_name: str, *identity: object) -> str:
    """A name for the one event of something that happens once (a verdict: the object's uid and
    its evaluation's number): posting it again is refused (409) rather than posted twice."""
    digest = hashlib.sha256("/".join(map(str, identity)).encode()).hexdigest()[:12]
    return f"{object_name[:236].rstrip('.-')}.{digest}"


def named_event(
    involved: Mapping[str, Any], name: str, warning: bool, reason: str, message: str, now: dt.datetime
) -> dict[str, Any]:
    """A core/v1 Event on ``involved`` (apiVersion, kind, namespace, name, uid), as kopf's poster
    writes one, under ``name``; the message redacted and cut as ``normal``/``warning`` do."""
    stamp = now.isoformat()
    return {
        "metadata": {"name": name, "namespace": involved["namespace"]},
        "involvedObject": dict(involved),
        "type": "Warning" if warning else "Normal",
        "reason": reason,
        "message": redact_text(message)[:1024],
        "action": "Judged",
        "reportingComponent": REPORTING_COMPONENT,
        "reportingInstance": REPORTING_COMPONENT,
        "source": {"component": REPORTING_COMPONENT},
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "eventTime": stamp,
        "count": 1,
    }


async def post_named(
    involved: Mapping[str, Any], name: str, warning: bool, reason: str, message: str
) -> bool:
    """Post the event and wait until the API server has it (not queued as kopf's are), so what
    is written after it never stands without it. False when an event of that name is there
    already: an earlier try of the same thing posted it."""
    body = named_event(involved, name, warning, reason, message, dt.datetime.now(dt.UTC))
    try:
        await kube.call(kube.core().create_namespaced_event, str(involved["namespace"]), body)
    except ApiException as exc:
        if exc.status == 409:
            return False
        raise
    return True
