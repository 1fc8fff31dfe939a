"""A pod's own API credentials: a token of its service account, bound to the pod through the
TokenRequest API as a projected token would be, in a kubeconfig the pod's processes read.

So RBAC applies to a pod here as it would in a cluster, rather than the kubelet's rights.
"""

from __future__ import annotations

from pathlib import Path

from kubernetes import client

from .certs import kubeconfig_dict, write_kubeconfig

TOKEN_EXPIRATION_S = 3600


def pod_kubeconfig(
    core: client.CoreV1Api, pod: client.V1Pod, pod_dir: Path, *, server: str, ca_file: Path
) -> Path:
    """Request a token for the pod's service account and write a kubeconfig holding it into ``pod_dir``."""
    account = pod.spec.service_account_name or "default"
    request = client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(
            audiences=[],
            expiration_seconds=TOKEN_EXPIRATION_S,
            bound_object_ref=client.V1BoundObjectReference(
                kind="Pod", api_version="v1", name=pod.metadata.name, uid=pod.metadata.uid
            ),
        )
    )
    token = core.create_namespaced_service_account_token(account, pod.metadata.namespace, request)
    path = pod_dir / "kubeconfig"
    write_kubeconfig(
        path,
        kubeconfig_dict(
            server,
            ca_file,
            user=f"system:serviceaccount:{pod.metadata.namespace}:{account}",
            token=token.status.token,
            namespace=pod.metadata.namespace,
        ),
    )
    return path
