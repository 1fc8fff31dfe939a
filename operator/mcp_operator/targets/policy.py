"""Where the operator may send requests: its own process probes and loads what a spec names,
so a spec must not be able to point it at the cloud metadata service, at link-local addresses,
or at another namespace's Services unless the operator's settings allow it.

Defaults: link-local (169.254.0.0/16, fe80::/10) and the metadata names and addresses are
denied, also in IPv6 forms that carry them; any other address is allowed unless an allow-list
of CIDRs is set; a name that does not resolve is not dialled (``TargetUnresolved``, looked at
again: cluster DNS may be late); a ``serviceRef`` may name only the resource's own namespace
unless the namespace is allowed (``*``: any). A spec's addresses are judged at admission, and
every connection again on the address it is opened to (``mcp_bench.dialguard``, through
``mcp_operator.targets.guarded``): a name may resolve differently the second time.

Where the operator runs decides what an unresolved name means. In the cluster, a Service name
that does not resolve yet may resolve soon. Outside it (``mcp-operator run`` with a kubeconfig,
as ``make demo`` runs it), a name only the cluster's DNS answers (:meth:`TargetPolicy.cluster_only`)
never will: what the operator dials itself is ``TargetUnresolvable`` at once, a refusal that
stands for the generation; what only pods in the cluster dial (a benchmark's shards) is left to
them, each of their connections judged by the same rule.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from mcp_bench.api import AddressRule, IpNetwork

from ..settings import CLUSTER_DOMAIN, cluster_domain_from_env, in_cluster

METADATA_HOSTS = frozenset({"metadata", "metadata.google.internal", "metadata.azure.internal"})
NOT_ALLOWED = "TargetNotAllowed"
UNRESOLVED = "TargetUnresolved"  # not yet resolvable: retried, never a refusal that stands
# a cluster-only name and the operator outside the cluster: it can never resolve it; stands
UNRESOLVABLE = "TargetUnresolvable"


@dataclass(frozen=True)
class DialProblem:
    """Why an address may not be dialled: ``TargetNotAllowed`` and ``TargetUnresolvable`` (a
    cluster-only name, the operator outside the cluster) stand; ``TargetUnresolved`` (a name that
    does not resolve now: cluster DNS may be late) is looked at again."""

    reason: str
    message: str

    @property
    def retry(self) -> bool:
        return self.reason == UNRESOLVED

    def __str__(self) -> str:
        return self.message


RESOLVE_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class TargetPolicy:
    allow_cidrs: tuple[IpNetwork, ...] = ()
    allow_namespaces: frozenset[str] = field(default_factory=frozenset)
    # where the operator runs (``settings.in_cluster``): outside, a cluster-only name is unresolvable
    in_cluster: bool = True
    cluster_domain: str = CLUSTER_DOMAIN

    @classmethod
    def from_env(cls) -> TargetPolicy:
        cidrs = tuple(
            ipaddress.ip_network(c.strip(), strict=False)
            for c in os.environ.get("MCP_TARGET_ALLOW_CIDRS", "").split(",")
            if c.strip()
        )
        namespaces = frozenset(
            n.strip() for n in os.environ.get("MCP_TARGET_ALLOW_NAMESPACES", "").split(",") if n.strip()
        )
        return cls(cidrs, namespaces, in_cluster=in_cluster(), cluster_domain=cluster_domain_from_env())

    def cluster_only(self, host: str) -> bool:
        """A name only the cluster's DNS answers: a Service's ``<svc>.<ns>.svc``, or the same under
        ``.svc.cluster.local`` or ``.svc.<the cluster domain>``. A plain host name is not one, even
        when it does not resolve (a short name, ``<svc>.<ns>``, may be an alias of this machine's)."""
        name = host.lower().rstrip(".")
        return name.endswith((".svc", ".svc.cluster.local", f".svc.{self.cluster_domain}"))

    def never_resolves(self, host: str) -> bool:
        """A name the operator can never resolve where it runs: cluster-only, and the operator
        outside the cluster (in it, an unresolved Service name may just be new to DNS)."""
        return not self.in_cluster and self.cluster_only(host)

    async def unresolvable(self, host: str) -> DialProblem | None:
        """``TargetUnresolvable`` for a name the operator dials but can never resolve where it
        runs (:meth:`never_resolves`, and it does not resolve here either: a machine may be given
        the cluster's DNS); None otherwise. In the cluster it looks nothing up."""
        if not self.never_resolves(host):
            return None
        try:
            if await _resolve(host):
                return None
        except UnicodeError:  # an empty or too long label (a serviceRef named "."): none resolves it
            pass
        return unresolvable_problem(host)

    def namespace_problem(self, own: str, target: str) -> str | None:
        if target == own or "*" in self.allow_namespaces or target in self.allow_namespaces:
            return None
        return (
            f"serviceRef names namespace {target}, but this resource is in {own}; the operator allows "
            "other namespaces only when listed in MCP_TARGET_ALLOW_NAMESPACES"
        )

    @property
    def rule(self) -> AddressRule:
        """The address rule every connection is held to (the operator's and its pods')."""
        return AddressRule(self.allow_cidrs)

    def address_problem(self, host: str, addresses: Iterable[str]) -> str | None:
        """Why requests to ``host`` (resolved to ``addresses``) are not allowed, or None."""
        if host.lower().rstrip(".") in METADATA_HOSTS:
            return f"{host} is a cloud metadata service"
        rule = self.rule
        return next((p for p in (rule.problem(a, host) for a in addresses) if p is not None), None)

    async def url_problem(self, url: str, *, by_pods: bool = False) -> DialProblem | None:
        """Why the operator or its pods must not dial ``url`` (a URL, or ``host:port``), or None.

        ``by_pods``: only pods in the cluster dial it (a benchmark's shards), never the operator:
        a cluster-only name the operator outside the cluster cannot resolve is no problem then
        (the pods resolve it, and judge every connection they open by the same rule)."""
        try:
            host = urlsplit(url if "://" in url else f"//{url}").hostname or ""
        except ValueError:  # e.g. a bracketed host that is no IPv6 address: [4E6F:eF3E2:dD]
            return DialProblem(NOT_ALLOWED, f"{url[:80]} has no host the target policy can read")
        try:
            addresses = [str(ipaddress.ip_address(host))]
        except ValueError:
            if not host:
                return DialProblem(NOT_ALLOWED, "it names no host the target policy could check")
            if host.lower().rstrip(".") in METADATA_HOSTS:
                return DialProblem(NOT_ALLOWED, f"{host} is a cloud metadata service")
            try:
                addresses = await _resolve(host)
            except UnicodeError:
                return DialProblem(NOT_ALLOWED, f"{host[:80]} is not a host name a resolver can look up")
            if not addresses and self.never_resolves(host):
                return None if by_pods else unresolvable_problem(host)
            if not addresses:
                return DialProblem(
                    UNRESOLVED,
                    f"{host} does not resolve, so the target policy cannot check it; it is looked at again",
                )
        problem = self.address_problem(host, addresses)
        return None if problem is None else DialProblem(NOT_ALLOWED, problem)


def unresolvable_problem(host: str) -> DialProblem:
    return DialProblem(
        UNRESOLVABLE,
        f"{host} is a cluster Service name, which only the cluster's DNS resolves, and the operator "
        "runs outside the cluster (no in-cluster config), so it can never resolve it; run the operator "
        "in the cluster, or point the field at an address the operator can reach from where it runs "
        "(for the target: spec.target.url); it is looked at again when the spec changes",
    )


async def _resolve(host: str) -> list[str]:
    """The host's addresses; none when it does not resolve here now. A name no resolver can
    encode (IDNA: a label past 63 characters) raises ``UnicodeError``: it never will."""
    if not host:
        return []
    try:
        infos = await asyncio.wait_for(
            asyncio.get_running_loop().getaddrinfo(host, None, type=socket.SOCK_STREAM), RESOLVE_TIMEOUT_S
        )
    except (OSError, TimeoutError):
        return []
    return sorted({str(info[4][0]) for info in infos})
