"""Pod addresses of the local nodes: what the API shows, and where the process really listens.

A pod needs an address of its own so that two pods can serve the same container port, and the
address must reach the EndpointSlices so that Services follow the pods. Linux routes all of
127.0.0.0/8 to ``lo``, so any 127.x.y.z can be bound without root, but the API server refuses
loopback addresses in an EndpointSlice ("may not be in the loopback range"). So each pod gets
a pair: its *pod IP* in ``POD_NETWORK`` (10.200.0.0/16, in ``status.podIP``, published by the
endpointslice controller) and its *loopback twin* with the same host bits in the cluster's pod
loopback range (``addressplan``: 127.101.0.0/16 for the first cluster on a machine), which the
process binds and the service proxy dials. The downward API's ``status.podIP`` and
``$MCP_POD_IP`` give the process its twin.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

POD_NETWORK = ipaddress.IPv4Network("10.200.0.0/16")
HOST_IP = "127.0.0.1"


def loopback_twin(address: str, loopback: ipaddress.IPv4Network) -> str:
    """The loopback address (in ``loopback``) a pod IP is served at; an address outside
    ``POD_NETWORK`` (kwok's pods, say) is returned as it is."""
    try:
        ip = ipaddress.IPv4Address(address)
    except ValueError:
        return address
    if ip not in POD_NETWORK:
        return address
    offset = int(ip) - int(POD_NETWORK.network_address)
    return str(loopback.network_address + offset)


@dataclass(frozen=True)
class PodAddresses:
    """The addresses one pod is given: ``pod_ip`` for the API, ``bind_ip`` for its process."""

    pod_ip: str
    bind_ip: str
    host_ip: str = HOST_IP


HOST_NETWORK = PodAddresses(HOST_IP, HOST_IP)


class PodIPAllocator:
    """Hands out the pod IPs of one node's pod CIDR (a part of ``POD_NETWORK``).

    Addresses are handed out in turn rather than lowest-first, so an address just freed is not
    given straight to the next pod while an EndpointSlice may still name it for the old one.
    """

    def __init__(self, pod_cidr: str, loopback: ipaddress.IPv4Network) -> None:
        self.loopback = loopback
        network = ipaddress.IPv4Network(pod_cidr)
        if not network.subnet_of(POD_NETWORK):
            raise ValueError(f"pod CIDR {pod_cidr} is not inside {POD_NETWORK}")
        # .1 is left out, as a node's bridge address would be
        self.hosts = [str(h) for h in network.hosts()][1:]
        if not self.hosts:
            raise ValueError(f"pod CIDR {pod_cidr} has no addresses to hand out")
        self.in_use: set[str] = set()
        self.next = 0

    def allocate(self, wanted: str | None = None) -> PodAddresses:
        """A free address: ``wanted`` (the pod's earlier IP, after a kubelet restart) when it is
        ours and free, else the next free one in turn."""
        if wanted in self.hosts and wanted not in self.in_use:
            chosen = wanted
        else:
            for step in range(len(self.hosts)):
                candidate = self.hosts[(self.next + step) % len(self.hosts)]
                if candidate not in self.in_use:
                    self.next = (self.next + step + 1) % len(self.hosts)
                    chosen = candidate
                    break
            else:
                raise RuntimeError(f"no free pod IP left ({len(self.hosts)} in use)")
        self.in_use.add(chosen)
        return PodAddresses(chosen, loopback_twin(chosen, self.loopback))

    def release(self, pod_ip: str) -> None:
        self.in_use.discard(pod_ip)
