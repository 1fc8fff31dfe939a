"""Certificates and kubeconfigs for a control plane on 127.0.0.1.

The API server needs a serving certificate, a client CA that makes the admin certificate
(O=system:masters) a cluster admin, and a service-account key pair for token signing. The local
kubelets serve pod logs over HTTPS (``kubeletlogs``) with a serving certificate of their own,
and the API server reaches them with a client certificate (``--kubelet-client-certificate``).
Everything is generated fresh per cluster; nothing is reused across clusters.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = dt.timedelta(days=365)


@dataclass(frozen=True)
class PkiPaths:
    """Where the generated files live inside a cluster's state directory."""

    root: Path

    @property
    def ca_cert(self) -> Path:
        return self.root / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.root / "ca.key"

    @property
    def serving_cert(self) -> Path:
        return self.root / "apiserver.crt"

    @property
    def serving_key(self) -> Path:
        return self.root / "apiserver.key"

    @property
    def admin_cert(self) -> Path:
        return self.root / "admin.crt"

    @property
    def admin_key(self) -> Path:
        return self.root / "admin.key"

    @property
    def kubelet_serving_cert(self) -> Path:
        return self.root / "kubelet.crt"

    @property
    def kubelet_serving_key(self) -> Path:
        return self.root / "kubelet.key"

    @property
    def kubelet_client_cert(self) -> Path:
        """The API server's client certificate towards the kubelets (logs, exec, port-forward)."""
        return self.root / "apiserver-kubelet-client.crt"

    @property
    def kubelet_client_key(self) -> Path:
        return self.root / "apiserver-kubelet-client.key"

    @property
    def sa_key(self) -> Path:
        return self.root / "sa.key"

    @property
    def sa_pub(self) -> Path:
        return self.root / "sa.pub"


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _builder(
    subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey
) -> x509.CertificateBuilder:
    now = dt.datetime.now(dt.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
    )


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attrs)


def self_signed_pair(directory: Path, host: str, common_name: str) -> tuple[Path, Path]:
    """A self-signed certificate for ``host`` (an IP address) and its key, written as
    ``tls.crt`` and ``tls.key``: for a test server whose clients trust exactly that certificate."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = _name(common_name)
    cert = (
        _builder(name, name, key.public_key())
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(host))]), critical=False
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "tls.crt", directory / "tls.key"
    _write_cert(cert_path, cert)
    _write_key(key_path, key)
    return cert_path, key_path


SERVER = ExtendedKeyUsageOID.SERVER_AUTH
CLIENT = ExtendedKeyUsageOID.CLIENT_AUTH


@dataclass(frozen=True)
class _Issuer:
    """The cluster CA, issuing leaf certificates."""

    key: ec.EllipticCurvePrivateKey
    name: x509.Name

    def issue(
        self,
        cert_path: Path,
        key_path: Path,
        subject: x509.Name,
        usage: x509.ObjectIdentifier,
        sans: list[x509.GeneralName] | None = None,
    ) -> None:
        """A fresh key and a certificate for ``subject`` with one extended key usage, written."""
        key = ec.generate_private_key(ec.SECP256R1())
        builder = _builder(subject, self.name, key.public_key())
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False).sign(
            self.key, hashes.SHA256()
        )
        _write_key(key_path, key)
        _write_cert(cert_path, cert)


def _issue_kubelet_pair(issuer: _Issuer, paths: PkiPaths) -> None:
    """The kubelets' serving certificate (for 127.0.0.1, the address their Nodes advertise) and
    the API server's client certificate towards them (a cluster admin, as kubeadm makes it)."""
    sans: list[x509.GeneralName] = [
        x509.DNSName("localhost"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
    ]
    issuer.issue(paths.kubelet_serving_cert, paths.kubelet_serving_key, _name("mcp-kubelet"), SERVER, sans)
    client_name = _name("kube-apiserver-kubelet-client", "system:masters")
    issuer.issue(paths.kubelet_client_cert, paths.kubelet_client_key, client_name, CLIENT)


def issue_kubelet_serving_pair(paths: PkiPaths, cert_path: Path, key_path: Path, node_ip: str) -> None:
    """A serving certificate for a kubelet at ``node_ip``, from the cluster's CA on disk: the API
    server verifies the kubelets it reaches (logs, exec) against that CA."""
    ca_key = serialization.load_pem_private_key(paths.ca_key.read_bytes(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{paths.ca_key}: not the cluster's EC key")
    ca_name = x509.load_pem_x509_certificate(paths.ca_cert.read_bytes()).subject
    sans: list[x509.GeneralName] = [x509.IPAddress(ipaddress.ip_address(node_ip))]
    _Issuer(ca_key, ca_name).issue(cert_path, key_path, _name("mcp-kubelet"), SERVER, sans)


def generate_pki(root: Path, service_ip: str | None = None, api_address: str = "127.0.0.1") -> PkiPaths:
    """Create CA, API-server serving cert (also for ``service_ip``, the ClusterIP of the
    ``kubernetes`` Service, and ``api_address``, where it listens), admin client cert, the
    kubelet pair and service-account keys."""
    root.mkdir(parents=True, exist_ok=True)
    paths = PkiPaths(root)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("mcp-devcluster-ca")
    ca_cert = (
        _builder(ca_name, ca_name, ca_key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    _write_key(paths.ca_key, ca_key)
    _write_cert(paths.ca_cert, ca_cert)

    sans: list[x509.GeneralName] = [
        x509.DNSName("localhost"),
        x509.DNSName("kubernetes"),
        x509.DNSName("kubernetes.default"),
        x509.DNSName("kubernetes.default.svc"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
    ]
    for extra in (service_ip, api_address if api_address != "127.0.0.1" else None):
        if extra:
            sans.append(x509.IPAddress(ipaddress.IPv4Address(extra)))
    issuer = _Issuer(ca_key, ca_name)
    issuer.issue(paths.serving_cert, paths.serving_key, _name("kube-apiserver"), SERVER, sans)
    issuer.issue(paths.admin_cert, paths.admin_key, _name("mcp-admin", "system:masters"), CLIENT)
    _issue_kubelet_pair(issuer, paths)

    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    _write_key(paths.sa_key, sa_key)
    paths.sa_pub.write_bytes(
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return paths


def kubeconfig_dict(
    server: str,
    ca_cert: Path,
    *,
    user: str = "admin",
    client_cert: Path | None = None,
    client_key: Path | None = None,
    token: str | None = None,
    namespace: str = "default",
) -> dict[str, object]:
    """A one-context kubeconfig; authenticates with a client certificate or a bearer token."""
    user_entry: dict[str, str] = {}
    if client_cert and client_key:
        user_entry = {"client-certificate": str(client_cert), "client-key": str(client_key)}
    if token:
        user_entry = {"token": token}
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "mcp-dev", "cluster": {"server": server, "certificate-authority": str(ca_cert)}}
        ],
        "users": [{"name": user, "user": user_entry}],
        "contexts": [
            {"name": "mcp-dev", "context": {"cluster": "mcp-dev", "user": user, "namespace": namespace}}
        ],
        "current-context": "mcp-dev",
    }


def write_kubeconfig(path: Path, config: dict[str, object]) -> Path:
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path
