"""Which addresses a connection may reach, judged on the address it is opened to.

A spec names hosts; a name checked once and resolved again by the client can answer
differently the second time (DNS rebinding), so the rule is applied where a socket is about to
connect (:class:`GuardedSocketFactory`, aiohttp's ``socket_factory``) or to the peer a
connection reached (:func:`check_peer`), once per connection. The operator's target policy
(``mcp_operator.targets.policy``) builds on this rule and hands it to its pods in ``MCP_DIAL_GUARD``;
``mcp_bench`` imports nothing of the operator's, so the rule lives here and serves both.

Denied always: link-local (169.254.0.0/16, fe80::/10, the metadata services' addresses: AWS's
IPv6 one, Alibaba Cloud's 100.100.100.200, Azure's WireServer 168.63.129.16) also when carried
in an IPv6 address (mapped, IPv4-translated, NAT64 at the well-known or the local-use prefix,
6to4, IPv4-compatible); with an allow-list, anything outside it.
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import json
import os
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
DENIED_NETWORKS: tuple[IpNetwork, ...] = (
    ipaddress.ip_network("169.254.0.0/16"),
    ipaddress.ip_network("fe80::/10"),
    ipaddress.ip_network("fd00:ec2::254/128"),  # AWS's metadata service over IPv6
    ipaddress.ip_network("100.100.100.200/32"),  # Alibaba Cloud's metadata service
    ipaddress.ip_network("168.63.129.16/32"),  # Azure's WireServer (and its metadata relay)
)
# the prefixes that carry an IPv4 address in their last 32 bits
CARRIERS: tuple[ipaddress.IPv6Network, ...] = (
    ipaddress.IPv6Network("64:ff9b::/96"),  # NAT64, the well-known prefix
    ipaddress.IPv6Network("64:ff9b:1::/48"),  # NAT64, the local-use prefix (RFC 8215), as /96
    ipaddress.IPv6Network("::ffff:0:0:0/96"),  # IPv4-translated (::ffff:0:a.b.c.d, RFC 2765)
)
IPV4_COMPATIBLE = ipaddress.ip_network("::/96")  # deprecated ::a.b.c.d
ENV = "MCP_DIAL_GUARD"  # set (JSON) in the operator's pods: their clients refuse what it denies
REFUSED = "refused by the target policy"  # in every refusal's message
AddrInfo = tuple[Any, ...]  # (family, type, proto, canonname, sockaddr), as getaddrinfo answers
SocketFactory = Callable[[AddrInfo], socket.socket]


def embedded_ipv4(address: IpAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one reaches, where it carries one: mapped (``::ffff:a.b.c.d``),
    IPv4-translated (``::ffff:0:a.b.c.d``), NAT64 (``64:ff9b::a.b.c.d``, and the local-use
    ``64:ff9b:1::a.b.c.d``), 6to4 (``2002:aabb:ccdd::``) or IPv4-compatible (``::a.b.c.d``).
    ``[::ffff:169.254.169.254]`` is the metadata service by another name."""
    if not isinstance(address, ipaddress.IPv6Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if any(address in net for net in CARRIERS) or (address in IPV4_COMPATIBLE and int(address) > 1):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


class DialRefused(OSError):
    """A connection the rule refused before any byte was sent (``EACCES``, so clients that
    merge several addresses' errors keep the errno)."""

    def __init__(self, message: str) -> None:
        super().__init__(errno.EACCES, message)


@dataclass(frozen=True)
class AddressRule:
    allow_cidrs: tuple[IpNetwork, ...] = ()

    def problem(self, address: str, host: str = "") -> str | None:
        """Why ``address`` (reached for ``host``, where known) may not be dialled, or None."""
        parsed = ipaddress.ip_address(address.split("%", 1)[0])
        inner = embedded_ipv4(parsed)
        name = f"{host} resolves to " if host and host != address else ""
        if any(a in net for net in DENIED_NETWORKS for a in (parsed, inner) if a is not None):
            shown = f"{parsed} ({inner})" if inner is not None else str(parsed)
            return f"{name}{shown}{',' if name else ' is'} a link-local or metadata address"
        reached = [a for a in (parsed, inner) if a is not None]
        if self.allow_cidrs and not any(a in net for net in self.allow_cidrs for a in reached):
            return f"{name}{parsed}{',' if name else ' is'} outside MCP_TARGET_ALLOW_CIDRS"
        return None

    def check(self, address: str, host: str = "") -> None:
        problem = self.problem(address, host)
        if problem is not None:
            raise DialRefused(f"{problem}: {REFUSED}")

    def to_env(self) -> str:
        return json.dumps({"allowCidrs": [str(net) for net in self.allow_cidrs]})

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> AddressRule | None:
        """The rule the operator set for this process, or None (a plain ``mcp-bench`` run)."""
        raw = environ.get(ENV)
        if not raw:
            return None
        cidrs = json.loads(raw).get("allowCidrs") or ()
        return cls(tuple(ipaddress.ip_network(c, strict=False) for c in cidrs))


@dataclass(frozen=True)
class GuardedSocketFactory:
    """aiohttp's ``socket_factory``: called with each address it is about to connect to, so the
    rule sees the address itself, after every resolution. Picklable (a probe round runs in a
    worker process); ``inner`` makes the socket where another factory already does."""

    rule: AddressRule
    inner: SocketFactory | None = None

    def __call__(self, addr_info: AddrInfo) -> socket.socket:
        self.rule.check(str(addr_info[4][0]))
        if self.inner is not None:
            return self.inner(addr_info)
        family, type_, proto = addr_info[:3]
        return socket.socket(family=family, type=type_, proto=proto)


def socket_factory(rule: AddressRule | None, inner: SocketFactory | None = None) -> SocketFactory | None:
    """The factory a connector takes: guarded when there is a rule, else ``inner``."""
    return inner if rule is None else GuardedSocketFactory(rule, inner)


def check_peer(rule: AddressRule | None, peername: Any, host: str = "") -> None:
    """For a connection already open (a client that connects on its own): refuse it unless its
    peer is allowed (a peer it cannot tell is not). The caller closes it before sending anything."""
    if rule is None:
        return
    if not peername:
        raise DialRefused(f"the address {host or 'a connection'} reached is unknown: {REFUSED}")
    rule.check(str(peername[0]), host)


async def grpc_target(rule: AddressRule, address: str) -> str:
    """``host:port`` as a gRPC target that dials the first address ``rule`` allows, pinned: gRPC
    resolves a name itself, but dials an ``ipv4:``/``ipv6:`` target as it is. Raises
    ``DialRefused`` naming the host when none is allowed. (Keep the name as the channel's
    authority: ``grpc.default_authority``.)"""
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    infos = await asyncio.get_running_loop().getaddrinfo(host, int(port), type=socket.SOCK_STREAM)
    problems = []
    for info in infos:
        ip = str(info[4][0])
        problem = rule.problem(ip, host)
        if problem is None:
            return f"ipv6:[{ip}]:{port}" if ":" in ip else f"ipv4:{ip}:{port}"
        problems.append(problem)
    raise DialRefused(f"{'; '.join(problems) or f'{host} resolves to nothing'}: {REFUSED}")


def is_refusal(exc: BaseException | None) -> bool:
    """Whether ``exc`` (or what it wraps: aiohttp's ``os_error``, a cause) is a refusal."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, DialRefused) or (
            isinstance(exc, OSError) and exc.errno == errno.EACCES and REFUSED in str(exc)
        ):
            return True
        exc = getattr(exc, "os_error", None) or exc.__cause__
        seen += 1
    return False


_ACTIVE: list[AddressRule | None] = []


def active_rule() -> AddressRule | None:
    """This process's rule: installed (the operator's own process) or read once from ``ENV``."""
    if not _ACTIVE:
        _ACTIVE.append(AddressRule.from_env())
    return _ACTIVE[0]


def install(rule: AddressRule | None) -> None:
    """Make ``rule`` this process's (the operator installs its policy's at start)."""
    _ACTIVE[:] = [rule]
