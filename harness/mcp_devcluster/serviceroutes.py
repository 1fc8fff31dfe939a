"""What the service proxy routes where: Services and EndpointSlices reduced to one route per
ClusterIP and port with its ready backends, and the round-robin pick among them.

Pure and apart from the proxy's sockets and watches, so that which endpoint a new connection
may reach (only ready ones, of the Service's own port, by the port's name) can be tested
without an API server. The watches turn API objects into the records here (``service_record``,
``slice_record``); ``RouteTable`` keeps them and answers ``routes()``.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeVar

from kubernetes import client

SERVICE_NAME_LABEL = "kubernetes.io/service-name"

ListenKey = tuple[str, int]  # (ClusterIP, port)
ObjectKey = tuple[str, str]  # (namespace, name)
_R = TypeVar("_R")


@dataclass(frozen=True)
class ServicePort:
    name: str
    port: int
    protocol: str = "TCP"


@dataclass(frozen=True)
class ServiceRecord:
    namespace: str
    name: str
    cluster_ips: tuple[str, ...]
    ports: tuple[ServicePort, ...]


@dataclass(frozen=True)
class SliceEndpoint:
    addresses: tuple[str, ...]
    ready: bool
    node: str = ""
    zone: str = ""


@dataclass(frozen=True)
class SliceRecord:
    namespace: str
    name: str
    service: str
    ports: tuple[ServicePort, ...]
    endpoints: tuple[SliceEndpoint, ...]


@dataclass(frozen=True, order=True)
class Backend:
    """One ready endpoint of a Service port: the pod IP as the slice names it, and its port."""

    address: str
    port: int

    def __str__(self) -> str:
        return f"{self.address}:{self.port}"


@dataclass(frozen=True)
class Route:
    service: str  # namespace/name
    port_name: str
    cluster_ip: str
    port: int
    backends: tuple[Backend, ...]


def service_record(svc: client.V1Service) -> ServiceRecord | None:
    """The Service's IPv4 ClusterIPs and TCP ports; None for a Service nothing listens for
    (headless, ExternalName, no TCP port)."""
    spec = svc.spec
    if spec is None or spec.type == "ExternalName":
        return None
    ips = tuple(ip for ip in (spec.cluster_ips or [spec.cluster_ip]) if ip and _ipv4(ip))
    ports = tuple(
        ServicePort(p.name or "", int(p.port), p.protocol or "TCP")
        for p in spec.ports or []
        if (p.protocol or "TCP") == "TCP"
    )
    if not ips or not ports:
        return None
    return ServiceRecord(svc.metadata.namespace, svc.metadata.name, ips, ports)


def slice_record(es: client.V1EndpointSlice) -> SliceRecord | None:
    """An IPv4 EndpointSlice of a Service; None for one that belongs to none."""
    service = (es.metadata.labels or {}).get(SERVICE_NAME_LABEL)
    if not service or es.address_type != "IPv4":
        return None
    ports = tuple(
        ServicePort(p.name or "", int(p.port), p.protocol or "TCP")
        for p in es.ports or []
        if p.port is not None
    )
    endpoints = tuple(
        SliceEndpoint(
            tuple(e.addresses or []),
            # the API says to read an unknown (nil) ready as ready
            ready=e.conditions is None or e.conditions.ready is not False,
            node=e.node_name or "",
            zone=e.zone or "",
        )
        for e in es.endpoints or []
    )
    return SliceRecord(es.metadata.namespace, es.metadata.name, service, ports, endpoints)


def ready_backends(port: ServicePort, slices: Iterable[SliceRecord]) -> tuple[Backend, ...]:
    """The ready endpoints of a Service port over all its slices, each once, in a fixed order:
    a slice port of the same name and protocol gives the target port."""
    found: set[Backend] = set()
    for es in slices:
        target = next((p.port for p in es.ports if p.name == port.name and p.protocol == port.protocol), None)
        if target is None:
            continue
        for endpoint in es.endpoints:
            if endpoint.ready:
                found.update(Backend(address, target) for address in endpoint.addresses)
    return tuple(sorted(found))


class RouteTable:
    """The Services and EndpointSlices the watches have seen, and the routes they make."""

    def __init__(self) -> None:
        self.services: dict[ObjectKey, ServiceRecord] = {}
        self.slices: dict[ObjectKey, SliceRecord] = {}

    def set_service(self, key: ObjectKey, record: ServiceRecord | None) -> None:
        _store(self.services, key, record)

    def set_slice(self, key: ObjectKey, record: SliceRecord | None) -> None:
        _store(self.slices, key, record)

    def routes(self) -> dict[ListenKey, Route]:
        by_service: dict[ObjectKey, list[SliceRecord]] = {}
        for es in self.slices.values():
            by_service.setdefault((es.namespace, es.service), []).append(es)
        out: dict[ListenKey, Route] = {}
        for (ns, name), svc in self.services.items():
            slices = by_service.get((ns, name), [])
            for port in svc.ports:
                backends = ready_backends(port, slices)
                for ip in svc.cluster_ips:
                    out[(ip, port.port)] = Route(f"{ns}/{name}", port.name, ip, port.port, backends)
        return out


class RoundRobin:
    """Each new connection to a listener takes the next of its ready backends."""

    def __init__(self) -> None:
        self.turns: dict[ListenKey, int] = {}

    def pick(self, key: ListenKey, backends: tuple[Backend, ...]) -> Backend | None:
        if not backends:
            return None
        turn = self.turns.get(key, 0)
        self.turns[key] = turn + 1
        return backends[turn % len(backends)]


def _store(table: dict[ObjectKey, _R], key: ObjectKey, record: _R | None) -> None:
    if record is None:
        table.pop(key, None)
    else:
        table[key] = record


def _ipv4(text: str) -> bool:
    try:
        ipaddress.IPv4Address(text)
    except ValueError:
        return False
    return True
