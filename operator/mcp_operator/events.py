"""Kubernetes events for our resources.

kopf's ``info``/``warn`` helpers obey the posting level, which is set to WARNING so kopf's
own per-handler chatter stays out of ``kubectl describe``; our events go through
``kopf.event`` so they are always posted, and every message is redacted first: an event is
readable by anyone who may list events in the namespace.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import kopf

from .redact import event_text

# a handler's Body, or the object as read from the API (kopf reads only its kind and metadata)
Subject = kopf.Body | Mapping[str, Any]


def normal(body: Subject, reason: str, message: str) -> None:
    kopf.event(cast(kopf.Body, body), type="Normal", reason=reason, message=event_text(message))


def warning(body: Subject, reason: str, message: str) -> None:
    kopf.event(cast(kopf.Body, body), type="Warning", reason=reason, message=event_text(message))
