"""The releases the release-gating tests ship: a Deployment of the reference server behind a
Service, the MCPReadiness that gates it, and the Argo CD hooks of ``manifests/argocd`` as written.
Applied directly (``e2e/test_release_gate.py``, which plays the syncs) or as a Helm chart that a
real Argo CD renders from Git (``e2e/test_argocd_sync.py``), so both judge the same objects.

A good release serves the model ``refmodel``; a broken build serves ``refmodel-next``, so its pods
pass their ``/health`` readiness probe and the rollout succeeds, but the gate's
``/v2/models/refmodel/ready`` probe answers 400.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from mcp_checks.config import ConfigContent, config_hash

from . import stack

ARGOCD_EXAMPLES = Path(__file__).resolve().parents[2] / "manifests" / "argocd"
APP = "model-server"
GATE = "release-gate"
SERVICE_PORT = 8080
LOCAL_RUNNER = {"mcp2026.io/local-runner": "true"}
GOOD_MODEL = "refmodel"
BROKEN_MODEL = "refmodel-next"
# where a chart leaves the release to Helm: replaced by a template of the value `release`
RELEASE_PLACEHOLDER = "__RELEASE__"
RELEASE_TEMPLATE = "{{ .Values.release | quote }}"
APPLICATION_PLACEHOLDER = "__APPLICATION__"
APPLICATION_TEMPLATE = "{{ .Values.application | quote }}"
APPLICATION_NAMESPACE_PLACEHOLDER = "__APPLICATION_NAMESPACE__"
APPLICATION_NAMESPACE_TEMPLATE = "{{ .Values.applicationNamespace | quote }}"
CONFIG = f"{APP}-config"
CONFIG_ANNOTATION = "checksum/config"  # configConsistency's default: the Helm convention


def service(cluster_ip: str | None = None) -> dict[str, Any]:
    return stack.service_body(APP, SERVICE_PORT, **({"clusterIP": cluster_ip} if cluster_ip else {}))


def deployment(version: str, model: str) -> dict[str, Any]:
    """Two replicas on the local runner (the image is not used: the kubelet runs the command; it
    names the release), rolled one new pod at a time."""
    container = stack.refserver_container(
        "--model", model, "--server-version", version, image=f"registry.example/model-server:{version}"
    )
    pod_spec = {"nodeSelector": LOCAL_RUNNER, "terminationGracePeriodSeconds": 2, "containers": [container]}
    strategy = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    return stack.deployment_body(APP, pod_spec, strategy=strategy)


def gate_spec(
    url: str, release: str, application: str | None = None, application_namespace: str = "argocd"
) -> dict[str, Any]:
    """The gate of the examples; ``application``: the Argo CD Application that syncs it, which
    its watch follows too (as ``manifests/argocd/postsync-gate.yaml`` does)."""
    watch: dict[str, Any] = {"workload": {"name": APP}, "settleTimeoutSeconds": 180}
    if application is not None:
        watch["application"] = {"name": application, "namespace": application_namespace}
    return {
        "target": {"url": url},
        "release": release,
        "watch": watch,
        "checks": {
            "healthProbe": {
                "path": f"/v2/models/{GOOD_MODEL}/ready",
                "requests": 400,
                "concurrency": 4,
                "minSuccessRatio": 0.99,
                # the verdicts here turn on status codes (200 or 400), not on latency: the latency
                # and prober-lag bounds are loose so that a busy shared machine does not turn a
                # round Inconclusive (ProberOverloaded) and hide what is tested
                "timeoutMs": 5000,
                "maxP99Ms": 2000,
                "maxProberLagMs": 2000,
            }
        },
    }


def gate(url: str, release: str) -> dict[str, Any]:
    return {
        "apiVersion": "mcp2026.io/v1alpha1",
        "kind": "MCPReadiness",
        "metadata": {"name": GATE},
        "spec": gate_spec(url, release),
    }


def example(file: str, release: str) -> list[dict[str, Any]]:
    """An Argo CD example of ``manifests/argocd`` as written, for ``release``: its Jobs' RELEASE
    set, and a nodeSelector so the local kubelet runs them as processes with their own
    ServiceAccount's token (a kwok node runs nothing)."""
    docs = [d for d in yaml.safe_load_all((ARGOCD_EXAMPLES / file).read_text()) if d]
    for doc in docs:
        if doc["kind"] == "Job":
            pod = doc["spec"]["template"]["spec"]
            pod["nodeSelector"] = LOCAL_RUNNER
            for container in pod["containers"]:
                for var in container.get("env") or []:
                    if var["name"] == "RELEASE":
                        var["value"] = release
    return docs


def hook(file: str, release: str) -> list[dict[str, Any]]:
    """The hook Job of an example and the account it runs as (without its MCPReadiness)."""
    return [d for d in example(file, release) if d["kind"] != "MCPReadiness"]


def config_map(data: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": CONFIG}, "data": data}


def config_consistency(application: str) -> dict[str, Any]:
    """configConsistency of the Deployment's config and of the Argo CD Application syncing it,
    from inside the sync: the gate's own wave (the example's) and the gate itself named."""
    gate_doc = next(d for d in example("postsync-gate.yaml", "") if d["kind"] == "MCPReadiness")
    wave = int(gate_doc["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"])
    return {
        "workload": {"name": APP},
        "configMaps": [CONFIG],
        "application": {"name": application, "gateWave": wave, "gateResource": f"MCPReadiness/{GATE}"},
    }


def chart(
    url: str,
    version: str,
    model: str,
    cluster_ip: str,
    config: dict[str, str] | None = None,
    application: str | None = None,
) -> dict[str, str]:
    """A Helm chart of one release, as files (path → text): the Service and the Deployment (wave
    0), and the PostSync and SyncFail examples as written, with the example's MCPReadiness (its
    wave and its hook) judging this Deployment; ``spec.release`` and the Jobs' RELEASE are the
    value ``release``, which the Application sets from ``$ARGOCD_APP_REVISION``, and the gate
    watches the Application named by the values ``application`` and ``applicationNamespace``
    (``$ARGOCD_APP_NAME``, and the Application's namespace written out: Argo CD's
    ``$ARGOCD_APP_NAMESPACE`` is the destination's). With ``config``,
    a ConfigMap whose hash the pod template carries (``checksum/config``), and with
    ``application`` the gate also checks configConsistency against that Argo CD Application."""
    gate_docs = example("postsync-gate.yaml", RELEASE_PLACEHOLDER)
    for doc in gate_docs:
        if doc["kind"] == "MCPReadiness":
            doc["spec"] = gate_spec(
                url, RELEASE_PLACEHOLDER, APPLICATION_PLACEHOLDER, APPLICATION_NAMESPACE_PLACEHOLDER
            )
            if application is not None:
                doc["spec"]["checks"]["configConsistency"] = config_consistency(application)
    workload = [service(cluster_ip), deployment(version, model)]
    if config is not None:
        digest = config_hash([ConfigContent("ConfigMap", CONFIG, config, {})])
        workload[1]["spec"]["template"]["metadata"]["annotations"] = {CONFIG_ANNOTATION: digest}
        workload.insert(0, config_map(config))
    templates = {
        "templates/model-server.yaml": workload,
        "templates/release-gate.yaml": gate_docs,
        "templates/release-gate-syncfail.yaml": example("syncfail-gate.yaml", RELEASE_PLACEHOLDER),
    }
    files = {
        "Chart.yaml": yaml.safe_dump({"apiVersion": "v2", "name": APP, "version": "0.1.0"}),
        "values.yaml": yaml.safe_dump({"release": "", "application": "", "applicationNamespace": "argocd"}),
    }
    templated = {
        RELEASE_PLACEHOLDER: RELEASE_TEMPLATE,
        APPLICATION_NAMESPACE_PLACEHOLDER: APPLICATION_NAMESPACE_TEMPLATE,  # before its prefix
        APPLICATION_PLACEHOLDER: APPLICATION_TEMPLATE,
    }
    for path, docs in templates.items():
        text = yaml.safe_dump_all(docs, sort_keys=False)
        for placeholder, template in templated.items():
            text = text.replace(placeholder, template)
        files[path] = text
    return files
