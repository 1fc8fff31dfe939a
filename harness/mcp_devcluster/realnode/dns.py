"""The real node's cluster DNS: CoreDNS (built from the Go module proxy) answering Service and
pod names under ``cluster.local`` from the API server, on the node's address, port 53.

It runs as a process of the harness beside the kubelet rather than as a pod: a cluster's DNS
pods need an image, a Deployment and a Service the harness would have to build and route first,
and what the pods see is the same (the kubelet's ``clusterDNS`` in their resolv.conf, names
answered from the cluster's Services). Names outside the cluster are not answered: nothing here
reaches off the machine.
"""

from __future__ import annotations

from pathlib import Path

from .. import build
from ..processes import ManagedProcess, StartupError, free_port, http_ok, stop_pid, wait_until
from .node import CLUSTER_DOMAIN


def corefile(*, address: str, kubeconfig: Path, ready_port: int, domain: str = CLUSTER_DOMAIN) -> str:
    """One server block: the kubernetes plugin for the cluster's zones (and their reverse
    lookups), ``ready`` once it has listed Services and EndpointSlices, short TTLs so a new
    Service answers within seconds."""
    return f""".:53 {{
    bind {address}
    errors
    ready 127.0.0.1:{ready_port}
    kubernetes {domain} in-addr.arpa ip6.arpa {{
        kubeconfig {kubeconfig}
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 5
    }}
    cache 5
}}
"""


def start_coredns(
    root: Path, kubeconfig: Path, address: str, timeout_s: float
) -> tuple[ManagedProcess, float]:
    """CoreDNS serving ``address``:53; returns once its kubernetes plugin has synced."""
    ready_port = free_port()
    (root / "Corefile").write_text(corefile(address=address, kubeconfig=kubeconfig, ready_port=ready_port))
    argv = [str(build.binary("coredns", "coredns")), "-conf", str(root / "Corefile")]
    proc = ManagedProcess("coredns", argv, root / "coredns.log")
    proc.start()
    try:
        took = wait_until(
            proc, lambda: http_ok(f"http://127.0.0.1:{ready_port}/ready"), timeout_s=timeout_s, what="ready"
        )
    except StartupError:
        if proc.popen is not None:
            stop_pid(proc.popen.pid)
        raise
    return proc, took
