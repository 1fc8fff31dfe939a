"""Which loopback addresses one cluster uses, so that clusters on one machine never meet.

ClusterIPs and the pods' loopback twins (``podnet``) are addresses in 127.0.0.0/8 that every
process on the machine shares; two clusters with the same ranges would bind each other's
addresses, or worse, route one cluster's Service to the other's pod. So each cluster takes a
*slot*: its service CIDR is 127.<slot>.0.0/16 and its pod twins are 127.<slot+1>.0.0/16. A slot
is claimed by listening on its proxy address (the first twin address, which no pod gets, on
kube-proxy's port 10249): only one socket can listen there, ``DevCluster.up`` holds it until
the service proxy inherits it, and the proxy holds it, as its admin endpoint, for the cluster's
life. A slot whose proxy died is free again.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
from dataclasses import dataclass

SLOTS = range(100, 254, 2)
PROXY_PORT = 10249


@dataclass(frozen=True)
class AddressPlan:
    slot: int
    # a range routed to this machine instead of the loopback one: pods in network namespaces of
    # their own (a real node's) cannot reach loopback ClusterIPs (``realnode.node``)
    routable_services: str | None = None

    @property
    def service_cidr(self) -> str:
        """Inside 127.0.0.0/8 unless a routable range is given, so the proxy can listen on every
        ClusterIP without root; the API server accepts a loopback service range (it refuses
        loopback only in EndpointSlices)."""
        return self.routable_services or f"127.{self.slot}.0.0/16"

    @property
    def kubernetes_service_ip(self) -> str:
        """The ClusterIP of the ``kubernetes`` Service: the first address of the range."""
        return str(next(ipaddress.IPv4Network(self.service_cidr).hosts()))

    @property
    def pod_loopback(self) -> ipaddress.IPv4Network:
        return ipaddress.IPv4Network(f"127.{self.slot + 1}.0.0/16")

    @property
    def proxy_address(self) -> tuple[str, int]:
        return str(self.pod_loopback.network_address + 1), PROXY_PORT


def claim_plan(routable_services: str | None = None) -> tuple[AddressPlan, socket.socket]:
    """The first slot no live cluster on this machine holds, and the listening socket that
    holds it; close the socket (or let the proxy that inherited it exit) to give it back."""
    for slot in SLOTS:
        plan = AddressPlan(slot, routable_services)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        # without SO_REUSEADDR a closed cluster's TIME_WAIT connections would block the slot;
        # with it, bind or listen still fails while another socket listens there
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(plan.proxy_address)
            sock.listen(64)
        except OSError:
            sock.close()
            continue
        return plan, sock
    raise RuntimeError(
        f"every address slot (127.{SLOTS.start}-{SLOTS.stop}.x.x) is held by a running cluster"
    )


def release(sock: socket.socket | None) -> None:
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.close()
