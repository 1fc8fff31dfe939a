"""``mcp-operator report``: a finished MCPBenchmark's merged document, read back from its report
ConfigMap (``contract.report_name``, key ``contract.RESULT_KEY``) with the checksum verified, so
it renders exactly as ``mcp-bench report`` renders a file."""

from __future__ import annotations

import os

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from mcp_bench.results.document import (
    ChecksumMismatchError,
    DocumentFormatError,
    ResultDocument,
    loads_document,
)

from .. import kube
from .contract import RESULT_KEY, report_name

SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


class ReportError(RuntimeError):
    """No report to render: none yet, not readable, or not a valid document."""


def _kubeconfig() -> str | None:
    """KUBECONFIG as the command was started with (the client reads it only at its import)."""
    return os.environ.get("KUBECONFIG") or None


def _core() -> client.CoreV1Api:
    """A client of its own from the kubeconfig, else the pod's service account."""
    try:
        return client.CoreV1Api(config.new_client_from_config(config_file=_kubeconfig()))
    except config.ConfigException:
        try:
            config.load_incluster_config()
        except config.ConfigException as exc:
            raise ReportError(f"no kubeconfig and not in a pod: {exc}") from exc
        return client.CoreV1Api(client.ApiClient())


def default_namespace() -> str:
    """The kubeconfig's current namespace, else the pod's own, else ``default`` (as kubectl)."""
    try:
        _, active = config.list_kube_config_contexts(config_file=_kubeconfig())
        namespace = (active or {}).get("context", {}).get("namespace")
        if namespace:
            return str(namespace)
    except (config.ConfigException, OSError):
        try:
            with open(SERVICE_ACCOUNT_NAMESPACE, encoding="utf-8") as f:
                return f.read().strip() or "default"
        except OSError:
            pass
    return "default"


def read_report(benchmark: str, namespace: str) -> ResultDocument:
    """The merged document of ``benchmark``; ReportError says why there is none."""
    name = report_name(benchmark)
    try:
        cm = _core().read_namespaced_config_map(name, namespace, _request_timeout=kube.REQUEST_TIMEOUT_S)
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise ReportError(f"reading {namespace}/{name}: cannot reach the API server: {exc}") from exc
    except ApiException as exc:
        if exc.status == 404:
            raise ReportError(
                f"no report ConfigMap {namespace}/{name}: the benchmark has not finished "
                f"(kubectl get mcpb {benchmark} -n {namespace}) or does not exist"
            ) from exc
        raise ReportError(f"reading {namespace}/{name}: {exc.status} {kube.api_message(exc)}") from exc
    text = (cm.data or {}).get(RESULT_KEY)
    if not text:
        raise ReportError(f"{namespace}/{name} holds no {RESULT_KEY}")
    try:
        return loads_document(text)
    except (ChecksumMismatchError, DocumentFormatError) as exc:
        raise ReportError(f"{namespace}/{name}: {exc}") from exc
