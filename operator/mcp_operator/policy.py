"""Where the operator may send requests: its own process probes and loads what a spec names,
so a spec must not be able to point it at the cloud metadata service, at link-local addresses,
or at another namespace's Services unless the operator's settings allow it.

Defaults: link-local (169.254.0.0/16, fe80::/10) and the metadata names and addresses are
denied; any other address is allowed unless an allow-list of CIDRs is set; a ``serviceRef``
may name only the resource's own namespace unless the namespace is allowed (``*``: any).
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
DENIED_NETWORKS: tuple[IpNetwork, ...] = (
    ipaddress.ip_network("169.254.0.0/16"),
    ipaddress.ip_network("fe80::/10"),
    ipaddress.ip_network("fd00:ec2::254/128"),
)
METADATA_HOSTS = frozenset({"metadata", "metadata.google.internal", "metadata.azure.internal"})
NAT64 = ipaddress.ip_network("64:ff9b::/96")  # the well-known prefix: an IPv4 address in its last 32 bits
IPV4_COMPATIBLE = ipaddress.ip_network("::/96")  # deprecated ::a.b.c.d


def embedded_ipv4(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one reaches, where it carries one: mapped (``::ffff:a.b.c.d``),
    NAT64 (``64:ff9b::a.b.c.d``), 6to4 (``2002:aabb:ccdd::``) or IPv4-compatible (``::a.b.c.d``).
    ``[::ffff:169.254.169.254]`` is the metadata service by another name."""
    if not isinstance(address, ipaddress.IPv6Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in NAT64 or (address in IPV4_COMPATIBLE and int(address) > 1):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


RESOLVE_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class TargetPolicy:
    allow_cidrs: tuple[IpNetwork, ...] = ()
    allow_namespaces: frozenset[str] = field(default_factory=frozenset)

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
        return cls(cidrs, namespaces)

    def namespace_problem(self, own: str, target: str) -> str | None:
        if target == own or "*" in self.allow_namespaces or target in self.allow_namespaces:
            return None
        return (
            f"serviceRef names namespace {target}, but this resource is in {own}; the operator allows "
            "other namespaces only when listed in MCP_TARGET_ALLOW_NAMESPACES"
        )

    def address_problem(self, host: str, addresses: Iterable[str]) -> str | None:
        """Why requests to ``host`` (resolved to ``addresses``) are not allowed, or None."""
        if host.lower().rstrip(".") in METADATA_HOSTS:
            return f"{host} is a cloud metadata service"
        for text in addresses:
            address = ipaddress.ip_address(text.split("%", 1)[0])
            inner = embedded_ipv4(address)
            if any(a in net for net in DENIED_NETWORKS for a in (address, inner) if a is not None):
                shown = f"{address} ({inner})" if inner is not None else str(address)
                return f"{host} resolves to {shown}, a link-local or metadata address"
            reached = [a for a in (address, inner) if a is not None]
            if self.allow_cidrs and not any(a in net for net in self.allow_cidrs for a in reached):
                return f"{host} resolves to {address}, outside MCP_TARGET_ALLOW_CIDRS"
        return None

    async def url_problem(self, url: str) -> str | None:
        """Why the operator or its pods must not dial ``url`` (a URL, or ``host:port``), or None."""
        host = urlsplit(url if "://" in url else f"//{url}").hostname or ""
        try:
            addresses = [str(ipaddress.ip_address(host))]
        except ValueError:
            addresses = await _resolve(host)
            if not addresses and self.allow_cidrs:
                return f"{host} does not resolve, so it cannot be checked against MCP_TARGET_ALLOW_CIDRS"
        return self.address_problem(host, addresses)


async def _resolve(host: str) -> list[str]:
    """The host's addresses; none when it does not resolve here (the request will say so)."""
    if not host:
        return []
    try:
        infos = await asyncio.wait_for(
            asyncio.get_running_loop().getaddrinfo(host, None, type=socket.SOCK_STREAM), RESOLVE_TIMEOUT_S
        )
    except (OSError, TimeoutError, UnicodeError):  # a name IDNA cannot encode resolves to nothing
        return []
    return sorted({str(info[4][0]) for info in infos})
