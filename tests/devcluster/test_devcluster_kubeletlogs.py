"""The local kubelet's container-log endpoint, served over mutual TLS as the API server reaches
it (its client certificate, the cluster CA), with no cluster started."""

from __future__ import annotations

import ssl
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from mcp_devcluster.addressplan import AddressPlan
from mcp_devcluster.certs import PkiPaths, generate_pki
from mcp_devcluster.kubelet import find_pod_dir, pod_dir_name
from mcp_devcluster.kubeletlogs import log_app, read_log, serve_in_thread, server_ssl_context
from mcp_devcluster.localnode import ready_node_status
from mcp_devcluster.processes import client_ssl_context

LOG = b"one\ntwo\nthree\nmcp-shard-result sha256=00\n"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> PkiPaths:
    return generate_pki(tmp_path_factory.mktemp("pki"), AddressPlan(121).kubernetes_service_ip)


@pytest.fixture(scope="module")
def served(pki: PkiPaths, tmp_path_factory: pytest.TempPathFactory) -> int:
    """A log endpoint over one pod directory, ``ns1/pod-a`` with a container ``shard``."""
    work = tmp_path_factory.mktemp("pods")
    pod_dir = work / pod_dir_name("ns1", "pod-a", "0123456789")
    pod_dir.mkdir()
    (pod_dir / "shard.log").write_bytes(LOG)
    ctx = server_ssl_context(pki.kubelet_serving_cert, pki.kubelet_serving_key, pki.ca_cert)
    return serve_in_thread(log_app(lambda ns, pod: find_pod_dir(work, ns, pod, None)), ctx)


def _get(port: int, path: str, ctx: ssl.SSLContext) -> tuple[int, bytes, str]:
    try:
        with urllib.request.urlopen(f"https://127.0.0.1:{port}{path}", context=ctx, timeout=10) as resp:
            return resp.status, resp.read(), resp.headers.get("Content-Type", "")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), ""


def _api_server(pki: PkiPaths) -> ssl.SSLContext:
    """What the API server presents (``--kubelet-client-certificate``) and checks the kubelet
    by (``--kubelet-certificate-authority``)."""
    return client_ssl_context(pki.ca_cert, pki.kubelet_client_cert, pki.kubelet_client_key)


@pytest.mark.parametrize(
    ("query", "body"),
    [
        ("", LOG),
        ("?tailLines=1", b"mcp-shard-result sha256=00\n"),
        ("?tailLines=2&limitBytes=5", b"three"),
        ("?limitBytes=3", b"one"),
        ("?tailLines=0", b""),
        ("?tailLines=99&timestamps=true&follow=false", LOG),  # stamps and follow ignored
    ],
)
def test_the_api_server_reads_a_container_log(pki: PkiPaths, served: int, query: str, body: bytes) -> None:
    status, got, content_type = _get(served, f"/containerLogs/ns1/pod-a/shard{query}", _api_server(pki))
    assert (status, got) == (200, body) and content_type.startswith("text/plain")


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/containerLogs/ns1/pod-b/shard", 404),  # no such pod here
        ("/containerLogs/ns1/pod-a/other", 404),  # no such container
        ("/containerLogs/ns1/pod-a/shard?tailLines=-1", 400),
        ("/containerLogs/ns1/pod-a/..", 400),  # not a name: never a path out of the pod
        ("/containerLogs/NS/pod-a/shard", 400),  # not a name
        ("/logs/", 404),
    ],
)
def test_what_is_not_a_log_here_is_an_error(pki: PkiPaths, served: int, path: str, status: int) -> None:
    assert _get(served, path, _api_server(pki))[0] == status


def test_a_client_without_a_certificate_of_the_cluster_ca_is_refused(
    pki: PkiPaths, served: int, tmp_path: Path
) -> None:
    anonymous = ssl.create_default_context(cafile=str(pki.ca_cert))
    other = generate_pki(tmp_path / "other")
    foreign = ssl.create_default_context(cafile=str(pki.ca_cert))
    foreign.load_cert_chain(str(other.kubelet_client_cert), str(other.kubelet_client_key))
    for ctx in (anonymous, foreign):
        with pytest.raises((urllib.error.URLError, ssl.SSLError, ConnectionError)):
            _get(served, "/containerLogs/ns1/pod-a/shard", ctx)


def test_the_newest_pod_of_a_name_is_the_one_whose_log_is_served(tmp_path: Path) -> None:
    older = tmp_path / pod_dir_name("ns1", "web-0", "aaaaaaaa-1")
    newer = tmp_path / pod_dir_name("ns1", "web-0", "bbbbbbbb-2")
    older.mkdir()
    time.sleep(0.01)
    newer.mkdir()
    (tmp_path / pod_dir_name("ns1", "web-00", "cccccccc-3")).mkdir()  # another pod's name
    assert find_pod_dir(tmp_path, "ns1", "web-0", None) == newer
    assert find_pod_dir(tmp_path, "ns1", "web-0", "aaaaaaaa-1") == older  # a running pod's own
    assert find_pod_dir(tmp_path, "ns1", "web-1", None) is None


def test_read_log_takes_the_tail_then_the_byte_limit(tmp_path: Path) -> None:
    path = tmp_path / "c.log"
    path.write_bytes(LOG)
    assert read_log(path, 2, None) == b"three\nmcp-shard-result sha256=00\n"
    assert read_log(path, None, None) == LOG


def test_the_node_advertises_its_log_port_at_an_address_the_api_server_reaches() -> None:
    status = ready_node_status("mcp-local", "2026-01-01T00:00:00Z", 41234)
    assert status["daemonEndpoints"] == {"kubeletEndpoint": {"Port": 41234}}
    assert {"type": "InternalIP", "address": "127.0.0.1"} in status["addresses"]
