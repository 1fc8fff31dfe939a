"""A container's environment as the kubelet builds it: ``env`` and ``envFrom`` with the
downward API, ConfigMap and Secret references, and ``$(VAR)`` expansion."""

from __future__ import annotations

import base64
import re

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from .podnet import HOST_NETWORK, PodAddresses

POD_IP_ENV = "MCP_POD_IP"
VAR_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def expand_refs(text: str, env: dict[str, str]) -> str:
    """Kubernetes' ``$(VAR)`` expansion: known names expand, unknown ones stay as written,
    and ``$$`` is an escaped ``$`` (so ``$$(VAR)`` is the literal ``$(VAR)``)."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        return "$" if name is None else env.get(name, match.group(0))

    return VAR_REF.sub(replace, text)


class ContainerSpecError(ValueError):
    """A pod this node cannot run (no command); the pod fails with this message."""


FIELD_PATH = re.compile(r"^metadata\.(labels|annotations)\['(.+)'\]$")


def field_value(pod: client.V1Pod, path: str, addresses: PodAddresses = HOST_NETWORK) -> str | None:
    """The downward-API fields a container's env may reference. The pod's IP is the loopback
    twin its process can bind (``podnet``), not the pod IP the API shows."""
    match = FIELD_PATH.match(path)
    if match:
        mapping = getattr(pod.metadata, match.group(1)) or {}
        return mapping.get(match.group(2))
    simple = {
        "metadata.name": pod.metadata.name,
        "metadata.namespace": pod.metadata.namespace,
        "metadata.uid": pod.metadata.uid,
        "spec.nodeName": pod.spec.node_name,
        "spec.serviceAccountName": pod.spec.service_account_name,
        "status.podIP": addresses.bind_ip,
        "status.podIPs": addresses.bind_ip,
        "status.hostIP": addresses.host_ip,
        "status.hostIPs": addresses.host_ip,
    }
    return simple.get(path)


class PodEnvironment:
    """Resolves environments through the API, with the kubelet's own credentials."""

    def __init__(self, core: client.CoreV1Api) -> None:
        self.core = core

    def container_env(
        self, pod: client.V1Pod, spec: client.V1Container, addresses: PodAddresses = HOST_NETWORK
    ) -> dict[str, str]:
        """The container's env; ``MCP_POD_IP`` (the address to bind) comes first, so the pod
        spec may override it."""
        env: dict[str, str] = {POD_IP_ENV: addresses.bind_ip}
        ns = pod.metadata.namespace
        for source in spec.env_from or []:
            prefix = source.prefix or ""
            if source.config_map_ref is not None:
                data = self._config_map(ns, source.config_map_ref.name, source.config_map_ref.optional)
                env.update({prefix + k: v for k, v in data.items()})
            if source.secret_ref is not None:
                data = self._secret(ns, source.secret_ref.name, source.secret_ref.optional)
                env.update({prefix + k: v for k, v in data.items()})
        for var in spec.env or []:
            if var.value_from is None:
                env[var.name] = expand_refs(var.value or "", env)
                continue
            value = self._value_from(pod, var.value_from, addresses)
            if value is not None:
                env[var.name] = value
        return env

    def _value_from(
        self, pod: client.V1Pod, source: client.V1EnvVarSource, addresses: PodAddresses
    ) -> str | None:
        ns = pod.metadata.namespace
        if source.field_ref is not None:
            return field_value(pod, source.field_ref.field_path, addresses)
        if source.config_map_key_ref is not None:
            ref = source.config_map_key_ref
            return self._config_map(ns, ref.name, ref.optional).get(ref.key)
        if source.secret_key_ref is not None:
            ref = source.secret_key_ref
            return self._secret(ns, ref.name, ref.optional).get(ref.key)
        return None

    def _config_map(self, ns: str, name: str, optional: bool | None) -> dict[str, str]:
        try:
            return dict(self.core.read_namespaced_config_map(name, ns).data or {})
        except ApiException as exc:
            if exc.status == 404 and optional:
                return {}
            raise ContainerSpecError(f"configmap {ns}/{name}: {exc.reason}") from exc

    def _secret(self, ns: str, name: str, optional: bool | None) -> dict[str, str]:
        try:
            data = self.core.read_namespaced_secret(name, ns).data or {}
        except ApiException as exc:
            if exc.status == 404 and optional:
                return {}
            raise ContainerSpecError(f"secret {ns}/{name}: {exc.reason}") from exc
        return {k: base64.b64decode(v).decode() for k, v in data.items()}
