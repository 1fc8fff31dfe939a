"""Where a resource points: a URL, or an in-cluster Service whose existence is checked.

Shared by both resources; Kubernetes reads come in through ``ServiceExists`` so the logic
stays testable without an API server.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from ..api.common import TargetRef
from ..redact import url_has_credentials
from .policy import TargetPolicy

ServiceExists = Callable[[str, str], Awaitable[bool]]


@dataclass(frozen=True)
class SpecProblem:
    """A semantically wrong spec: it passed the schema but cannot run as written."""

    reason: str
    message: str


def credentials_problem(fields: Iterable[tuple[str, str]], hint: str) -> SpecProblem | None:
    """``CredentialsInUrl`` naming every field (path, value) whose URL carries credentials, or
    None: the CRDs refuse these at apply time, and this refuses them where an older CRD did not.
    The message names fields, never values, so it repeats no credential."""
    leaking = [field for field, url in fields if url_has_credentials(url)]
    if not leaking:
        return None
    return SpecProblem(
        "CredentialsInUrl",
        f"{', '.join(leaking)} must not carry credentials (userinfo, or a token-like or percent-encoded "
        f"query parameter name); {hint}",
    )


def service_url(ref: TargetRef, namespace: str) -> str:
    return f"{ref.scheme}://{service_host(ref, namespace)}:{ref.port}"


def service_host(ref: TargetRef, namespace: str) -> str:
    return f"{ref.name}.{ref.namespace or namespace}.svc"


def join_url(base: str, path: str) -> str:
    """``path`` appended to ``base``'s own path, its query and fragment kept where a URL keeps
    them: appended as text, a path after a ``#fragment`` (or a ``?query``) is never requested."""
    parts = urlsplit(base)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + path))


async def resolve_url(
    url: str | None,
    ref: TargetRef | None,
    namespace: str,
    exists: ServiceExists,
    policy: TargetPolicy | None = None,
    *,
    by_pods: bool = False,
) -> str | SpecProblem:
    """The URL to load or probe; a Service that does not exist is a ``TargetNotFound``, and one
    the operator's target policy forbids is ``TargetNotAllowed`` (checked before any request), and
    a name that does not resolve yet is ``TargetUnresolved`` (looked at again, never a refusal).

    A cluster-only name (a ``serviceRef``'s ``<name>.<ns>.svc``, or such a URL host) that the
    operator, running outside the cluster, cannot resolve is ``TargetUnresolvable`` at once (a
    refusal that stands for the generation: waiting cannot help) when the operator dials it;
    ``by_pods`` (only pods in the cluster dial it, as a benchmark's shards do) lets it through to
    them. In the cluster a ``serviceRef`` is not looked up at all, as before."""
    policy = policy or TargetPolicy.from_env()
    if url:
        dial = await policy.url_problem(url, by_pods=by_pods)
        return SpecProblem(dial.reason, f"spec.target.url: {dial}") if dial else url
    if ref is None:  # the CRDs' CEL rules make this unreachable through the API
        return SpecProblem("TargetMissing", "set spec.target.url or spec.target.serviceRef")
    ns = ref.namespace or namespace
    problem = policy.namespace_problem(namespace, ns)
    if problem:
        return SpecProblem("TargetNotAllowed", problem)
    if not await exists(ns, ref.name):
        return SpecProblem("TargetNotFound", f"Service {ns}/{ref.name} does not exist")
    never = None if by_pods else await policy.unresolvable(service_host(ref, namespace))
    if never is not None:
        return SpecProblem(never.reason, f"spec.target.serviceRef: {never}")
    return service_url(ref, namespace)
