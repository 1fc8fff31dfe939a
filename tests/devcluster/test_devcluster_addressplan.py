"""Address slots: each cluster's ClusterIPs and pod twins are loopback ranges of its own, and
two clusters on one machine never hold the same slot."""

from __future__ import annotations

import ipaddress

import pytest

from mcp_devcluster.addressplan import SLOTS, AddressPlan, claim_plan, release
from mcp_devcluster.nodespec import default_local_nodes
from mcp_devcluster.podnet import POD_NETWORK, loopback_twin

LOOPBACK = ipaddress.IPv4Network("127.0.0.0/8")


@pytest.mark.parametrize("slot", [SLOTS[0], SLOTS[-1]])
def test_a_plan_is_two_loopback_ranges_that_do_not_meet(slot: int) -> None:
    plan = AddressPlan(slot)
    services = ipaddress.IPv4Network(plan.service_cidr)
    assert services.subnet_of(LOOPBACK) and plan.pod_loopback.subnet_of(LOOPBACK)
    assert not services.overlaps(plan.pod_loopback)
    assert plan.kubernetes_service_ip == str(services.network_address + 1)
    # the proxy's address is a twin no pod gets: 10.200.0.x lies outside every node's pod CIDR
    host, port = plan.proxy_address
    assert ipaddress.IPv4Address(host) in plan.pod_loopback and port == 10249
    for node in default_local_nodes():
        cidr = ipaddress.IPv4Network(node.pod_cidr)
        assert cidr.subnet_of(POD_NETWORK) and not cidr.is_loopback  # EndpointSlices refuse loopback
        first, last = (loopback_twin(str(a), plan.pod_loopback) for a in (cidr[0], cidr[-1]))
        assert ipaddress.IPv4Address(first) in plan.pod_loopback
        assert ipaddress.IPv4Address(last) in plan.pod_loopback
        assert ipaddress.IPv4Address(host) not in ipaddress.IPv4Network(f"{first}/{cidr.prefixlen}")


def test_slots_never_share_an_address() -> None:
    ranges = [ipaddress.IPv4Network(AddressPlan(s).service_cidr) for s in SLOTS]
    ranges += [AddressPlan(s).pod_loopback for s in SLOTS]
    assert all(not a.overlaps(b) for i, a in enumerate(ranges) for b in ranges[i + 1 :])


def test_a_routable_service_range_replaces_the_loopback_one_and_keeps_the_slot() -> None:
    """A real node's pods live in network namespaces of their own and cannot reach loopback
    ClusterIPs; the cluster then takes a routable range, the pod twins stay the slot's."""
    plan = AddressPlan(SLOTS[0], "10.213.16.0/20")
    assert plan.service_cidr == "10.213.16.0/20"
    assert plan.kubernetes_service_ip == "10.213.16.1"
    assert plan.pod_loopback == AddressPlan(SLOTS[0]).pod_loopback


def test_a_claimed_slot_is_skipped_until_given_back() -> None:
    first, held = claim_plan()
    try:
        second, other = claim_plan()
        try:
            assert second.slot != first.slot
        finally:
            release(other)
    finally:
        release(held)
    again, sock = claim_plan()  # given back: the lowest free slot is the same one again
    release(sock)
    assert again.slot <= first.slot
