"""``mcp-operator report``: a finished MCPBenchmark's merged document, read back from its report
ConfigMap (``contract.report_name``, key ``contract.RESULT_KEY``) with the checksum verified, so
it renders exactly as ``mcp-bench report`` renders a file; the benchmark's status (phase, shards
accepted and rejected, conditions) is added as a section of its own."""

from __future__ import annotations

import base64
import os
from collections.abc import Callable
from typing import Any

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from pydantic.alias_generators import to_camel

from mcp_bench.api import (
    ChecksumMismatchError,
    DocumentFormatError,
    ResultDocument,
    SignatureMismatchError,
    Table,
    loads_document,
)
from mcp_checks.api import ExitCode
from mcp_common.tolerant import held, status_in

from .. import kube
from ..api.benchmark import PLURAL, MCPBenchmarkStatus
from ..api.common import GROUP, VERSION
from .contract import KEY_SECRET_KEY, RESULT_KEY, report_name, run_key_name
from .status import result_rows

SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


class ReportError(RuntimeError):
    """No report to render: none yet, not readable, or not a valid document. ``code``: the exit
    code of the table every command shares (``mcp_checks.exitcodes``): 2 when the cause is what
    was asked (no kubeconfig, no such benchmark), else 3: nothing could be verified."""

    def __init__(self, message: str, code: ExitCode = ExitCode.NOT_VERIFIED) -> None:
        super().__init__(message)
        self.code = code


def _kubeconfig() -> str | None:
    """KUBECONFIG as the command was started with (the client reads it only at its import)."""
    return os.environ.get("KUBECONFIG") or None


def _client() -> client.ApiClient:
    """A client of its own from the kubeconfig, else the pod's service account."""
    try:
        return config.new_client_from_config(config_file=_kubeconfig())
    except config.ConfigException:
        try:
            config.load_incluster_config()
        except config.ConfigException as exc:
            raise ReportError(f"no kubeconfig and not in a pod: {exc}", ExitCode.USAGE) from exc
        return client.ApiClient()


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


def _run_key(api: client.ApiClient, namespace: str, job: str) -> tuple[bytes | None, str]:
    """The run's signing key, or None and why it cannot be read (gone with its Job, or no right
    to read Secrets): then only the checksum is checked, and the report says so."""
    if not job:
        return None, "the benchmark names no run"
    try:
        secret = client.CoreV1Api(api).read_namespaced_secret(
            run_key_name(job), namespace, _request_timeout=kube.REQUEST_TIMEOUT_S
        )
    except ApiException as exc:
        return None, f"the run's key {namespace}/{run_key_name(job)} is not readable ({exc.status})"
    encoded = (secret.data or {}).get(KEY_SECRET_KEY)
    if not encoded:
        return None, f"{namespace}/{run_key_name(job)} holds no key"
    return base64.b64decode(encoded), ""


def _read(what: str, hint: str, call: Callable[[], Any], missing: ExitCode) -> Any:
    """One read for the report, its failure as a ReportError with the table's code: ``missing``
    for a 404 (a benchmark not there is what was asked, 2; its report not written yet, 3); an
    unreachable or refusing API server leaves nothing verified (3)."""
    try:
        return call()
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise ReportError(f"reading {what}: cannot reach the API server: {exc}") from exc
    except ApiException as exc:
        if exc.status == 404:
            raise ReportError(f"no {what} ({hint})", missing) from exc
        raise ReportError(f"reading {what}: {exc.status} {kube.api_message(exc)}") from exc


def read_report(
    benchmark: str, namespace: str, api: client.ApiClient | None = None
) -> tuple[ResultDocument, dict[str, Any], str]:
    """The merged document of ``benchmark``, the benchmark object, and how the document was
    verified; ReportError says why there is none, or that it was rewritten after the operator
    signed it. ``api``: the operator's own client (a drill reading its stage's benchmark);
    default: one from the kubeconfig or the pod's account (the command)."""
    api = api or _client()
    name = report_name(benchmark)
    obj = _read(
        f"MCPBenchmark {namespace}/{benchmark}",
        f"kubectl get mcpb -n {namespace}",
        lambda: client.CustomObjectsApi(api).get_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, benchmark, _request_timeout=kube.REQUEST_TIMEOUT_S
        ),
        ExitCode.USAGE,
    )
    cm = _read(
        f"report ConfigMap {namespace}/{name}",
        f"the benchmark has not finished: kubectl get mcpb {benchmark} -n {namespace}",
        lambda: client.CoreV1Api(api).read_namespaced_config_map(
            name, namespace, _request_timeout=kube.REQUEST_TIMEOUT_S
        ),
        ExitCode.NOT_VERIFIED,
    )
    text = (cm.data or {}).get(RESULT_KEY)
    if not text:
        raise ReportError(f"{namespace}/{name} holds no {RESULT_KEY}")
    key, why = _run_key(api, namespace, status_in(obj, MCPBenchmarkStatus).job_name or "")
    try:
        doc = loads_document(text, key)
    except SignatureMismatchError as exc:
        raise ReportError(
            f"{namespace}/{name} does not verify ({exc}): it was changed after the operator wrote it"
        ) from exc
    except (ChecksumMismatchError, DocumentFormatError) as exc:
        raise ReportError(f"{namespace}/{name}: {exc}") from exc
    differ = disagreements(doc, obj)
    if differ:
        raise ReportError(
            f"{namespace}/{name} disagrees with the MCPBenchmark's status.results, which the operator "
            f"wrote from the same merged document: {'; '.join(differ)}. It was rewritten after the run"
            + (" (signed by someone who can read the run's key)" if key is not None else "")
        )
    verified = "signed with the run's key" if key is not None else f"checksum only: {why}"
    rows = len(status_in(obj, MCPBenchmarkStatus).results)
    verified += (
        f"; its figures match status.results, {rows} level(s)" if rows else "; status holds no results"
    )
    return doc, obj, verified


# the figures of a status row (``LevelRow``) the report is held to
COMPARED = ("level", "requests", "errors", "throughput_rps", "mean_ms", "p50_ms", "p95_ms", "p99_ms", "slo")


def disagreements(doc: ResultDocument, obj: dict[str, Any]) -> list[str]:
    """Where the report's figures differ from its MCPBenchmark's ``status.results``: the operator
    writes both from one merged document with one function (``status.level_row``), so a
    difference means the report is not that document. Status is the operator's alone to write;
    a Secret reader may re-sign a report but not rewrite status. Empty when they agree, or when
    status holds no rows to compare (a run that ended without results)."""
    shown = status_in(obj, MCPBenchmarkStatus).results
    if not shown:
        return []
    ours = result_rows(doc)
    if len(ours) != len(shown):
        return [f"{len(ours)} levels in the report, {len(shown)} in status"]
    found = []
    for mine, row in zip(ours, shown, strict=True):
        for field in COMPARED:
            theirs = held(row, field)
            if theirs is not None and str(getattr(mine, field)) != str(theirs):
                what = f"level {row.level} {to_camel(field)}"
                found.append(f"{what}: {getattr(mine, field)} in the report, {theirs} in status")
    return found


def status_tables(obj: dict[str, Any], verified: str = "") -> list[Table]:
    """The cluster's side of the run, as the report's sections: what the status says of the
    run and its shards (rejected shard results are never in the figures), and the conditions."""
    meta = obj.get("metadata") or {}
    status = status_in(obj, MCPBenchmarkStatus)
    shards = {} if status.shards is None else status.shards.to_patch()
    generation = status.observed_generation
    rows = [
        ["phase", status.phase or ""],
        ["verdict", status.verdict or ""],
        *([f"shards {k}", str(v)] for k, v in shards.items()),
        ["job", status.job_name or ""],
        ["report", status.report_name or ""],
        ["report verified", verified],
        ["observed generation", "" if generation is None else str(generation)],
    ]
    title = f"MCPBenchmark {meta.get('namespace', '')}/{meta.get('name', '')}"
    conditions = [[c.type, c.status, c.reason, c.message, c.last_transition_time] for c in status.conditions]
    return [
        Table("benchmark", ["Field", "Value"], [r for r in rows if r[1]], title=title),
        Table("conditions", ["Type", "Status", "Reason", "Message", "Since"], conditions, title="Conditions"),
    ]
