"""The real node's pure parts: containerd's and the kubelet's configuration, the CNI network,
image names as containerd knows them, the kubelet's serving certificate and the package check.
The node itself runs in ``e2e/test_realnode.py``."""

from __future__ import annotations

import ipaddress
import tomllib
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from mcp_devcluster.certs import PkiPaths, generate_pki, issue_kubelet_serving_pair
from mcp_devcluster.realnode import debs, dns, images, node, runtime


def test_containerd_config_carries_what_this_machine_needs(tmp_path: Path) -> None:
    paths = runtime.RuntimePaths(tmp_path / "ctd", runtime.short_run_dir(tmp_path, "containerd"))
    cfg = tomllib.loads(runtime.containerd_config(paths, "docker.io/mcp-operator/pause:v1"))
    assert cfg["version"] == 2 and cfg["grpc"]["address"] == str(paths.socket)
    assert len(str(paths.socket) + ".ttrpc") < 108  # a unix socket path's limit, whatever tmp_path is
    assert cfg["root"] == str(paths.data) and cfg["state"] == str(paths.state)
    cri = cfg["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["restrict_oom_score_adj"] is True  # no CAP_SYS_RESOURCE here
    assert cri["sandbox_image"] == "docker.io/mcp-operator/pause:v1"
    assert cri["containerd"]["runtimes"]["runc"]["options"]["SystemdCgroup"] is False
    assert cri["cni"] == {"bin_dir": "/usr/lib/cni", "conf_dir": str(paths.cni_conf_dir), "max_conf_num": 1}


def test_kubelet_config_for_cgroup_v1_without_systemd_or_image_gc(tmp_path: Path) -> None:
    cfg = node.kubelet_config(
        endpoint="unix:///x.sock",
        ca=tmp_path / "ca.crt",
        cert=tmp_path / "k.crt",
        key=tmp_path / "k.key",
        port=10250,
        healthz_port=10248,
        node_ip="10.213.0.2",
        pod_cidr="10.213.1.0/24",
        cluster_dns="10.213.0.2",
    )
    assert cfg["failCgroupV1"] is False and cfg["cgroupDriver"] == "cgroupfs"
    assert cfg["imageGCHighThresholdPercent"] == 100  # nothing could be pulled back
    assert cfg["address"] == "10.213.0.2" and cfg["readOnlyPort"] == 0
    assert cfg["authentication"]["anonymous"]["enabled"] is False
    assert cfg["authorization"]["mode"] == "Webhook"
    assert cfg["makeIPTablesUtilChains"] is False  # nothing written into the machine's firewall
    # every pod's resolv.conf names the node's CoreDNS and searches the cluster's domain
    assert cfg["clusterDNS"] == ["10.213.0.2"] and cfg["clusterDomain"] == "cluster.local"


def test_coredns_answers_the_cluster_domain_on_the_node_address_only(tmp_path: Path) -> None:
    text = dns.corefile(address="10.213.0.2", kubeconfig=tmp_path / "kc", ready_port=41234)
    assert text.startswith(".:53 {") and text.count("{") == text.count("}") == 2
    lines = [line.strip() for line in text.splitlines()]
    assert "bind 10.213.0.2" in lines  # never the machine's other addresses
    assert "ready 127.0.0.1:41234" in lines
    assert "kubernetes cluster.local in-addr.arpa ip6.arpa {" in lines
    assert f"kubeconfig {tmp_path / 'kc'}" in lines
    assert "ttl 5" in lines  # a new Service answers within seconds
    assert not any(line.startswith("forward") for line in lines)  # nothing off the machine


def test_the_service_range_is_routable_and_apart_from_the_node_and_its_pods() -> None:
    services = ipaddress.IPv4Network(node.SERVICE_CIDR)
    assert not services.is_loopback and services.is_private
    assert ipaddress.IPv4Address(node.NODE_IP) not in services
    assert not services.overlaps(ipaddress.IPv4Network(node.POD_CIDR))


def test_cni_bridge_hands_out_the_pod_cidr(tmp_path: Path) -> None:
    conf = node.cni_config("br-x", "10.213.1.0/24", tmp_path / "leases")
    bridge = conf["plugins"][0]
    assert bridge["type"] == "bridge" and bridge["bridge"] == "br-x" and bridge["isGateway"] is True
    assert bridge["ipMasq"] is False  # nothing from a pod is masqueraded off the machine
    assert bridge["ipam"]["ranges"] == [[{"subnet": "10.213.1.0/24"}]]
    assert bridge["ipam"]["dataDir"] == str(tmp_path / "leases")  # gone with the node, not shared


def test_image_names_as_containerd_holds_them() -> None:
    assert images.containerd_name("mcp-operator/pause:v1") == "docker.io/mcp-operator/pause:v1"
    assert images.containerd_name("busybox:1") == "docker.io/library/busybox:1"
    assert images.containerd_name("registry.local:5000/a/b:1") == "registry.local:5000/a/b:1"
    assert images.containerd_name("localhost/a:1") == "localhost/a:1"


def test_the_kubelet_serving_certificate_is_for_the_node_address_and_from_the_cluster_ca(
    tmp_path: Path,
) -> None:
    pki: PkiPaths = generate_pki(tmp_path / "pki")
    cert_path, key_path = tmp_path / "k.crt", tmp_path / "k.key"
    issue_kubelet_serving_pair(pki, cert_path, key_path, "10.213.0.2")
    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    ca = x509.load_pem_x509_certificate(pki.ca_cert.read_bytes())
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("10.213.0.2")]
    assert cert.issuer == ca.subject
    public_key = ca.public_key()
    assert isinstance(public_key, ec.EllipticCurvePublicKey)
    cert.verify_directly_issued_by(ca)


def test_a_missing_package_is_named() -> None:
    assert debs.missing(("no-such-package-mcp-operator",)) == ["no-such-package-mcp-operator"]
