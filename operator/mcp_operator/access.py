"""Whether the operator holds a right before it acts on it.

Fault and GPU-sampler rights are granted per namespace by its owner (``rbac``), so a missing
binding is normal, not a defect. Asking the API server first (a SelfSubjectAccessReview, which
every authenticated account may create) turns it into a refusal that names the right and the
binding to create, before anything is touched, instead of a 403 half way through a drill.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass

from kubernetes import client

from . import kube


@dataclass(frozen=True)
class Right:
    """One verb on one resource (``pods/eviction``: a subresource) of an API group."""

    verb: str
    resource: str
    group: str = ""

    def shown(self, namespace: str | None) -> str:
        resource, slash, subresource = self.resource.partition("/")
        qualified = (f"{resource}.{self.group}" if self.group else resource) + slash + subresource
        return f"{self.verb} {qualified}" + (f" in {namespace}" if namespace else " (cluster-wide)")


async def allowed(authz: client.AuthorizationV1Api, namespace: str | None, right: Right) -> bool:
    resource, _, subresource = right.resource.partition("/")
    attributes = {"verb": right.verb, "group": right.group, "resource": resource}
    if subresource:
        attributes["subresource"] = subresource
    if namespace:
        attributes["namespace"] = namespace
    body = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": attributes},
    }
    review = await kube.call(authz.create_self_subject_access_review, body)
    return bool(review.status and review.status.allowed)


async def missing(
    authz: client.AuthorizationV1Api, namespace: str | None, rights: Iterable[Right]
) -> list[Right]:
    """The rights of ``rights`` the operator does not hold in ``namespace`` (None: cluster-wide)."""
    wanted = list(dict.fromkeys(rights))
    answers = await asyncio.gather(*(allowed(authz, namespace, r) for r in wanted))
    return [r for r, ok in zip(wanted, answers, strict=True) if not ok]
