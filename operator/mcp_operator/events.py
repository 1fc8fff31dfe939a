"""Kubernetes events for our resources.

kopf's ``info``/``warn`` helpers obey the posting level, which is set to WARNING so kopf's
own per-handler chatter stays out of ``kubectl describe``; our events go through
``kopf.event`` so they are always posted.
"""

from __future__ import annotations

import kopf


def normal(body: kopf.Body, reason: str, message: str) -> None:
    kopf.event(body, type="Normal", reason=reason, message=message[:1024])


def warning(body: kopf.Body, reason: str, message: str) -> None:
    kopf.event(body, type="Warning", reason=reason, message=message[:1024])
