"""PKI and kubeconfig of the local control plane: checked with cryptography, ssl and the
Kubernetes client's own kubeconfig loader."""

from __future__ import annotations

import datetime as dt
import ipaddress
import socket
import ssl
import stat
import threading
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from kubernetes import client, config

from mcp_devcluster.addressplan import AddressPlan
from mcp_devcluster.certs import PkiPaths, generate_pki, kubeconfig_dict, write_kubeconfig
from mcp_devcluster.processes import client_ssl_context

PLAN = AddressPlan(120)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> PkiPaths:
    return generate_pki(tmp_path_factory.mktemp("pki"), PLAN.kubernetes_service_ip)


def _cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def _eku(cert: x509.Certificate) -> set[x509.ObjectIdentifier]:
    return set(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)


CERTS = ("serving", "admin", "kubelet_serving", "kubelet_client")


def _pairs(pki: PkiPaths) -> list[tuple[Path, Path]]:
    return [(getattr(pki, f"{name}_cert"), getattr(pki, f"{name}_key")) for name in CERTS]


def test_every_file_is_written_and_keys_are_private(pki: PkiPaths) -> None:
    for path in (pki.ca_cert, *(c for c, _ in _pairs(pki)), pki.sa_pub):
        assert path.is_file() and path.stat().st_size > 0
    for key in (pki.ca_key, *(k for _, k in _pairs(pki)), pki.sa_key):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600, key


def test_ca_is_a_ca(pki: PkiPaths) -> None:
    ca = _cert(pki.ca_cert)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    assert ca.extensions.get_extension_for_class(x509.KeyUsage).value.key_cert_sign
    ca.verify_directly_issued_by(ca)  # self-signed


def test_serving_cert_is_issued_by_the_ca_for_loopback(pki: PkiPaths) -> None:
    ca, serving = _cert(pki.ca_cert), _cert(pki.serving_cert)
    serving.verify_directly_issued_by(ca)
    sans = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    ips = set(sans.get_values_for_type(x509.IPAddress))
    assert ipaddress.ip_address("127.0.0.1") in ips
    # in-cluster clients reach the API server at the first address of the service range
    assert next(ipaddress.ip_network(PLAN.service_cidr).hosts()) in ips
    dns = set(sans.get_values_for_type(x509.DNSName))
    assert {"localhost", "kubernetes.default.svc"} <= dns
    assert _eku(serving) == {ExtendedKeyUsageOID.SERVER_AUTH}
    now = dt.datetime.now(dt.UTC)
    assert serving.not_valid_before_utc <= now < serving.not_valid_after_utc


def test_admin_cert_is_a_cluster_admin_client(pki: PkiPaths) -> None:
    admin = _cert(pki.admin_cert)
    admin.verify_directly_issued_by(_cert(pki.ca_cert))
    orgs = [a.value for a in admin.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    assert orgs == ["system:masters"]
    assert _eku(admin) == {ExtendedKeyUsageOID.CLIENT_AUTH}


def test_the_kubelet_pair_serves_loopback_and_lets_the_api_server_in(pki: PkiPaths) -> None:
    ca, serving = _cert(pki.ca_cert), _cert(pki.kubelet_serving_cert)
    serving.verify_directly_issued_by(ca)
    sans = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("127.0.0.1") in sans.get_values_for_type(x509.IPAddress)
    assert _eku(serving) == {ExtendedKeyUsageOID.SERVER_AUTH}
    client_cert = _cert(pki.kubelet_client_cert)
    client_cert.verify_directly_issued_by(ca)
    assert _eku(client_cert) == {ExtendedKeyUsageOID.CLIENT_AUTH}
    names = [a.value for a in client_cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    assert names == ["kube-apiserver-kubelet-client"]


def test_keys_match_their_certificates(pki: PkiPaths) -> None:
    for cert_path, key_path in _pairs(pki):
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
        der, spki = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        assert key.public_key().public_bytes(der, spki) == _cert(cert_path).public_key().public_bytes(
            der, spki
        )


def test_service_account_key_pair_signs_and_verifies(pki: PkiPaths) -> None:
    private = serialization.load_pem_private_key(pki.sa_key.read_bytes(), password=None)
    public = serialization.load_pem_public_key(pki.sa_pub.read_bytes())
    assert isinstance(private, rsa.RSAPrivateKey) and isinstance(public, rsa.RSAPublicKey)
    assert private.key_size >= 2048
    signature = private.sign(b"token", padding.PKCS1v15(), hashes.SHA256())
    public.verify(signature, b"token", padding.PKCS1v15(), hashes.SHA256())


def test_mutual_tls_handshake_on_loopback(pki: PkiPaths) -> None:
    """A real TLS server with the serving cert that requires a client cert from the CA: the
    admin context the harness uses verifies it by hostname 127.0.0.1 and is accepted."""
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(str(pki.serving_cert), str(pki.serving_key))
    server_ctx.load_verify_locations(str(pki.ca_cert))
    server_ctx.verify_mode = ssl.CERT_REQUIRED
    seen: dict[str, object] = {}
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        listener.settimeout(10)

        def serve() -> None:
            conn, _ = listener.accept()
            with server_ctx.wrap_socket(conn, server_side=True) as tls:
                seen["peer"] = tls.getpeercert()
                tls.sendall(b"ok")

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        ctx = client_ssl_context(pki.ca_cert, pki.admin_cert, pki.admin_key)
        port = listener.getsockname()[1]
        with (
            socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
            ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
        ):
            assert tls.recv(2) == b"ok"
        thread.join(timeout=10)
    peer = seen["peer"]
    assert isinstance(peer, dict)
    subject = {k: v for rdn in peer["subject"] for k, v in rdn}
    assert subject["organizationName"] == "system:masters"


def test_a_foreign_ca_is_refused(pki: PkiPaths, tmp_path: Path) -> None:
    """Same CA name, different key (a second cluster): the signature check must fail."""
    other = generate_pki(tmp_path / "other")
    with pytest.raises(InvalidSignature):
        _cert(pki.serving_cert).verify_directly_issued_by(_cert(other.ca_cert))


def test_kubeconfig_with_client_cert(pki: PkiPaths, tmp_path: Path) -> None:
    path = write_kubeconfig(
        tmp_path / "kubeconfig",
        kubeconfig_dict(
            "https://127.0.0.1:6443", pki.ca_cert, client_cert=pki.admin_cert, client_key=pki.admin_key
        ),
    )
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    data = yaml.safe_load(path.read_text())
    assert data["current-context"] == "mcp-dev"
    (user,) = data["users"]
    assert user["user"] == {"client-certificate": str(pki.admin_cert), "client-key": str(pki.admin_key)}
    # the Kubernetes client reads it as the operator and kubectl would
    cfg = client.Configuration()
    config.load_kube_config(config_file=str(path), client_configuration=cfg)
    assert cfg.host == "https://127.0.0.1:6443"
    assert cfg.ssl_ca_cert == str(pki.ca_cert)
    assert cfg.cert_file == str(pki.admin_cert) and cfg.key_file == str(pki.admin_key)


def test_kubeconfig_with_token(pki: PkiPaths, tmp_path: Path) -> None:
    conf = kubeconfig_dict(
        "https://127.0.0.1:6443", pki.ca_cert, user="system:serviceaccount:ns:sa", token="abc", namespace="ns"
    )
    path = write_kubeconfig(tmp_path / "kc", conf)
    data = yaml.safe_load(path.read_text())
    (user,) = data["users"]
    assert user == {"name": "system:serviceaccount:ns:sa", "user": {"token": "abc"}}
    (ctx,) = data["contexts"]
    assert ctx["context"] == {"cluster": "mcp-dev", "user": "system:serviceaccount:ns:sa", "namespace": "ns"}
    cfg = client.Configuration()
    config.load_kube_config(config_file=str(path), client_configuration=cfg)
    assert "Bearer abc" in cfg.api_key.values()
