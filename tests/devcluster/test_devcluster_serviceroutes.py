"""The service proxy's endpoint selection, without sockets or an API server: which endpoints a
new connection to a ClusterIP:port may reach (ready ones of that port only), in what order,
and what Services and EndpointSlices the proxy ignores."""

from __future__ import annotations

from collections import Counter

import pytest
from kubernetes import client

from mcp_devcluster.serviceroutes import (
    Backend,
    RoundRobin,
    RouteTable,
    ServicePort,
    ServiceRecord,
    SliceEndpoint,
    SliceRecord,
    ready_backends,
    service_record,
    slice_record,
)

HTTP = ServicePort("http", 8080)


def _slice(
    name: str, *endpoints: SliceEndpoint, ports: tuple[ServicePort, ...] = (ServicePort("http", 8000),)
) -> SliceRecord:
    return SliceRecord("ns", name, "web", ports, endpoints)


def _ep(address: str, ready: bool = True) -> SliceEndpoint:
    return SliceEndpoint((address,), ready)


def test_only_ready_endpoints_are_backends() -> None:
    es = _slice("web-1", _ep("10.200.1.2"), _ep("10.200.2.2", ready=False), _ep("10.200.1.3"))
    assert ready_backends(HTTP, [es]) == (Backend("10.200.1.2", 8000), Backend("10.200.1.3", 8000))


def test_the_target_port_comes_from_the_slice_port_of_the_same_name() -> None:
    ports = (ServicePort("metrics", 9090), ServicePort("http", 8000))
    es = _slice("web-1", _ep("10.200.1.2"), ports=ports)
    assert ready_backends(HTTP, [es]) == (Backend("10.200.1.2", 8000),)
    assert ready_backends(ServicePort("metrics", 80), [es]) == (Backend("10.200.1.2", 9090),)
    assert ready_backends(ServicePort("grpc", 81), [es]) == ()
    assert ready_backends(ServicePort("http", 8080, "UDP"), [es]) == ()


def test_endpoints_of_every_slice_count_once_in_a_fixed_order() -> None:
    one = _slice("web-1", _ep("10.200.2.9"), _ep("10.200.1.2"))
    two = _slice("web-2", _ep("10.200.1.2"), _ep("10.200.1.7"))
    backends = ready_backends(HTTP, [one, two])
    assert [b.address for b in backends] == ["10.200.1.2", "10.200.1.7", "10.200.2.9"]


def test_a_backend_reads_as_address_and_port() -> None:
    assert str(Backend("10.200.2.7", 8000)) == "10.200.2.7:8000"


def test_route_table_follows_services_and_slices() -> None:
    table = RouteTable()
    table.set_service(("ns", "web"), ServiceRecord("ns", "web", ("127.96.0.10",), (HTTP,)))
    assert table.routes()[("127.96.0.10", 8080)].backends == ()  # a Service without endpoints
    table.set_slice(("ns", "web-1"), _slice("web-1", _ep("10.200.1.2"), _ep("10.200.2.2")))
    route = table.routes()[("127.96.0.10", 8080)]
    assert (route.service, route.port_name, len(route.backends)) == ("ns/web", "http", 2)

    # the pod is deleted: the endpointslice controller marks it not ready, then drops it
    table.set_slice(("ns", "web-1"), _slice("web-1", _ep("10.200.1.2", ready=False), _ep("10.200.2.2")))
    assert table.routes()[("127.96.0.10", 8080)].backends == (Backend("10.200.2.2", 8000),)
    table.set_slice(("ns", "web-1"), None)
    assert table.routes()[("127.96.0.10", 8080)].backends == ()
    table.set_service(("ns", "web"), None)
    assert table.routes() == {}


def test_slices_of_another_service_or_namespace_do_not_mix_in() -> None:
    table = RouteTable()
    table.set_service(("ns", "web"), ServiceRecord("ns", "web", ("127.96.0.10",), (HTTP,)))
    table.set_slice(
        ("ns", "api-1"), SliceRecord("ns", "api-1", "api", (ServicePort("http", 8000),), (_ep("10.200.1.9"),))
    )
    table.set_slice(
        ("other", "web-1"),
        SliceRecord("other", "web-1", "web", (ServicePort("http", 8000),), (_ep("10.200.1.8"),)),
    )
    assert table.routes()[("127.96.0.10", 8080)].backends == ()


def test_round_robin_takes_turns_and_follows_a_changing_set() -> None:
    rr = RoundRobin()
    key = ("127.96.0.10", 8080)
    a, b, c = (Backend(f"10.200.1.{i}", 8000) for i in (2, 3, 4))
    picks = Counter(rr.pick(key, (a, b, c)) for _ in range(300))
    assert picks == {a: 100, b: 100, c: 100}
    # once an endpoint is gone, no new connection goes to it
    assert {rr.pick(key, (a, c)) for _ in range(10)} == {a, c}
    assert rr.pick(key, ()) is None
    assert rr.pick(("127.96.0.11", 80), (b,)) == b  # each listener has its own turn


def _service(**spec: object) -> client.V1Service:
    return client.V1Service(
        metadata=client.V1ObjectMeta(name="web", namespace="ns"), spec=client.V1ServiceSpec(**spec)
    )


def test_service_record_keeps_ipv4_cluster_ips_and_tcp_ports() -> None:
    svc = _service(
        cluster_ip="127.96.0.10",
        cluster_ips=["127.96.0.10", "fd00::10"],
        ports=[
            client.V1ServicePort(name="http", port=8080, protocol="TCP"),
            client.V1ServicePort(name="dns", port=53, protocol="UDP"),
            client.V1ServicePort(port=9000),
        ],
    )
    record = service_record(svc)
    assert record == ServiceRecord(
        "ns", "web", ("127.96.0.10",), (ServicePort("http", 8080), ServicePort("", 9000))
    )


@pytest.mark.parametrize(
    "spec",
    [
        {"cluster_ip": "None", "ports": [client.V1ServicePort(port=80)]},  # headless
        {"type": "ExternalName", "external_name": "example.com"},
        {"cluster_ip": "127.96.0.10", "ports": [client.V1ServicePort(port=53, protocol="UDP")]},
    ],
)
def test_services_nothing_listens_for(spec: dict[str, object]) -> None:
    assert service_record(_service(**spec)) is None


def _endpoint_slice(labels: dict[str, str], address_type: str = "IPv4") -> client.V1EndpointSlice:
    return client.V1EndpointSlice(
        address_type=address_type,
        metadata=client.V1ObjectMeta(name="web-abc", namespace="ns", labels=labels),
        ports=[client.DiscoveryV1EndpointPort(name="http", port=8000, protocol="TCP")],
        endpoints=[
            client.V1Endpoint(addresses=["10.200.1.2"], conditions=client.V1EndpointConditions(ready=True)),
            client.V1Endpoint(
                addresses=["10.200.2.2"],
                conditions=client.V1EndpointConditions(ready=False, serving=True, terminating=True),
                node_name="mcp-local-b",
                zone="zone-b",
            ),
            client.V1Endpoint(addresses=["10.200.1.3"]),  # no conditions: read as ready
        ],
    )


def test_slice_record_reads_readiness_as_the_api_defines_it() -> None:
    record = slice_record(_endpoint_slice({"kubernetes.io/service-name": "web"}))
    assert record is not None and record.service == "web"
    assert [e.ready for e in record.endpoints] == [True, False, True]
    assert record.endpoints[1].zone == "zone-b" and record.endpoints[1].node == "mcp-local-b"
    assert ready_backends(HTTP, [record]) == (Backend("10.200.1.2", 8000), Backend("10.200.1.3", 8000))


def test_slices_without_a_service_or_not_ipv4_are_ignored() -> None:
    assert slice_record(_endpoint_slice({})) is None
    assert slice_record(_endpoint_slice({"kubernetes.io/service-name": "web"}, "FQDN")) is None
