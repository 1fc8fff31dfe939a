"""Where a resource points: a URL, or an in-cluster Service whose existence is checked.

Shared by both resources; Kubernetes reads come in through ``ServiceExists`` so the logic
stays testable without an API server.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from .api.common import TargetRef
from .policy import TargetPolicy

ServiceExists = Callable[[str, str], Awaitable[bool]]


@dataclass(frozen=True)
class SpecProblem:
    """A semantically wrong spec: it passed the schema but cannot run as written."""

    reason: str
    message: str


def service_url(ref: TargetRef, namespace: str) -> str:
    return f"{ref.scheme}://{ref.name}.{ref.namespace or namespace}.svc:{ref.port}"


def join_url(base: str, path: str) -> str:
    return base.rstrip("/") + path


async def resolve_url(
    url: str | None,
    ref: TargetRef | None,
    namespace: str,
    exists: ServiceExists,
    policy: TargetPolicy | None = None,
) -> str | SpecProblem:
    """The URL to load or probe; a Service that does not exist is a ``TargetNotFound``, and one
    the operator's target policy forbids is ``TargetNotAllowed`` (checked before any request)."""
    policy = policy or TargetPolicy.from_env()
    if url:
        problem = await policy.url_problem(url)
        return SpecProblem("TargetNotAllowed", problem) if problem else url
    if ref is None:  # the CRDs' CEL rules make this unreachable through the API
        return SpecProblem("TargetMissing", "set spec.target.url or spec.target.serviceRef")
    ns = ref.namespace or namespace
    problem = policy.namespace_problem(namespace, ns)
    if problem:
        return SpecProblem("TargetNotAllowed", problem)
    if not await exists(ns, ref.name):
        return SpecProblem("TargetNotFound", f"Service {ns}/{ref.name} does not exist")
    return service_url(ref, namespace)
