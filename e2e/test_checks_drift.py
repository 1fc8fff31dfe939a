"""Recording-rule drift against a real Prometheus (Debian's package) started on loopback,
scraping a real prometheus_client exporter in this process whose values the test moves while
the check runs; the reference tests read PrometheusRule objects and a ConfigMap from the real
local control plane."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

from mcp_checks.drift import MetricDriftSpec, RecordingRule, RulesFile, run_metric_drift
from mcp_checks.suite import CheckContext, plan_checks, run_checks
from mcp_checks.verdict import CheckOutcome, Verdict
from mcp_devcluster import stack

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
pytestmark = pytest.mark.skipif(not Path(PROMETHEUS).exists(), reason="no prometheus binary")

RULES = """\
groups:
  - name: drift
    interval: 1s
    rules:
      - record: job:requests:rate_sum
        expr: sum by (job, route) (requests_total)
      - record: model:queue_depth:sum
        expr: sum by (model) (queue_depth)
      - record: job:requests:skewed
        expr: sum by (job, route) (requests_total) * 1.01
      - record: route:bed_requests:sum
        expr: sum by (route) (requests_total)
      - record: route:bed_requests_drifted:sum
        expr: sum by (route) (requests_total) * 1.005
      - record: job:requests:tenth
        expr: sum by (job, route) (requests_total) * 1.001
      - record: model:idle_share:ratio
        expr: sum by (model) (queue_depth{model="mistral"}) / sum by (model) (queue_depth{model="mistral"})
"""
IDLE = "model:idle_share:ratio"  # 0 / 0: NaN on both sides
IDLE_EXPR = 'sum by (model) (queue_depth{model="mistral"}) / sum by (model) (queue_depth{model="mistral"})'
TENTH = "job:requests:tenth"  # 0.1 % more than the raw expression
BED = "route:bed_requests:sum"  # faithful to its PrometheusRule
BED_DRIFTED = "route:bed_requests_drifted:sum"  # 0.5 % more than its PrometheusRule says
REVIEWED = "sum by (route) (requests_total)"  # what the PrometheusRule says the drifted rule records
# prometheus-operator's PrometheusRule CRD cannot be fetched here: this stands in for it, with the
# same group, version, names and scope, and a structural schema that keeps spec as written
PROMETHEUS_RULE_CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: prometheusrules.monitoring.coreos.com
spec:
  group: monitoring.coreos.com
  scope: Namespaced
  names:
    kind: PrometheusRule
    listKind: PrometheusRuleList
    plural: prometheusrules
    singular: prometheusrule
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              x-kubernetes-preserve-unknown-fields: true
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def exporter() -> Iterator[int]:
    """A counter per route that keeps moving (a drift check must hold while values change)
    and a gauge with two label sets."""
    registry = CollectorRegistry()
    requests = Counter("requests", "requests served", ["route"], registry=registry)
    depth = Gauge("queue_depth", "queued requests", ["model"], registry=registry)
    depth.labels(model="llama").set(40)
    depth.labels(model="mistral").set(0)  # a zero value must compare, not divide by zero
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(0.05):
            requests.labels(route="/v1/chat").inc(3)
            requests.labels(route="/v1/embed").inc(1)

    thread = threading.Thread(target=tick, daemon=True)
    thread.start()
    server, server_thread = start_http_server(0, addr="127.0.0.1", registry=registry)
    try:
        yield server.server_port
    finally:
        stop.set()
        server.shutdown()
        server.server_close()
        server_thread.join(timeout=5)


def _query(url: str, promql: str) -> list[dict[str, object]]:
    with urllib.request.urlopen(
        f"{url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}", timeout=5
    ) as r:
        result: list[dict[str, object]] = json.load(r)["data"]["result"]
    return result


@pytest.fixture(scope="module")
def prometheus_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Prometheus's configuration, its rules file (``rules.yml``) and its data."""
    return tmp_path_factory.mktemp("prometheus")


def _stop(proc: subprocess.Popen[Any]) -> None:
    """A Prometheus this module started: SIGTERM, then SIGKILL after 10 s."""
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


@pytest.fixture(scope="module")
def prometheus(exporter: int, prometheus_dir: Path) -> Iterator[str]:
    work = prometheus_dir
    (work / "rules.yml").write_text(RULES)
    (work / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "rule_files:\n  - rules.yml\n"
        "scrape_configs:\n  - job_name: inference\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{exporter}']\n"
    )
    port = _free_port()
    log = (work / "prometheus.log").open("wb")
    proc = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={work / 'prometheus.yml'}",
            f"--storage.tsdb.path={work / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if all(
                    _query(url, r)
                    for r in (
                        "job:requests:rate_sum",
                        "job:requests:skewed",
                        "model:queue_depth:sum",
                        BED_DRIFTED,
                        TENTH,
                        IDLE,
                    )
                ):
                    break
            except OSError:
                pass
            assert proc.poll() is None, (work / "prometheus.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "the recording rules produced no series within 60 s"
            time.sleep(0.3)
        yield url
    finally:
        _stop(proc)
        log.close()


async def test_correct_rules_pass_against_their_expressions(prometheus: str) -> None:
    spec = MetricDriftSpec(
        prometheus,
        (
            RecordingRule("job:requests:rate_sum", expr="sum(requests_total) by (job, route)"),
            RecordingRule("model:queue_depth:sum", expr="sum by (model) (queue_depth)"),
        ),
        window_s=4,
        points=3,
    )
    out = await run_metric_drift(spec)
    assert (out.outcome, out.reason) == (Verdict.PASS, "MetricDriftWithinThreshold"), out
    assert out.observed["job:requests:rate_sum.series"] == "2"  # two routes
    assert out.observed["model:queue_depth:sum.series"] == "2"  # the zero-valued model compares too
    assert out.observed["job:requests:rate_sum.maxDrift"] == "0.0000%"
    assert out.source == prometheus and out.thresholds["maxRelativeDrift"] == "< 0.3000%"


async def test_rules_read_only_from_the_rules_api_are_never_a_pass(prometheus: str) -> None:
    """Issue 18 item 5: the skewed rule read back from /api/v1/rules was compared with itself and
    passed at 0.0000 %. With nothing independent, every rule is Inconclusive instead."""
    spec = MetricDriftSpec(prometheus, (RecordingRule("job:requests:skewed"), RecordingRule(BED_DRIFTED)))
    out = await run_metric_drift(spec)
    assert (out.outcome, out.reason) == (Verdict.INCONCLUSIVE, "NoIndependentReference"), out
    assert "job:requests:skewed" in out.message and BED_DRIFTED in out.message
    assert not any(key.endswith(".maxDrift") for key in out.observed)  # no self-comparison figure


async def test_rule_whose_expression_differs_from_the_raw_query_fails_with_the_figure(
    prometheus: str,
) -> None:
    raw = "sum by (job, route) (requests_total)"  # what the skewed rule should have recorded
    spec = MetricDriftSpec(prometheus, (RecordingRule("job:requests:skewed", expr=raw),))
    out = await run_metric_drift(spec)
    assert (out.outcome, out.reason) == (Verdict.FAIL, "MetricDriftAboveThreshold"), out
    assert "drift 1.0000% >= 0.3000%" in out.message
    assert 'job:requests:skewed{job="inference",route=' in out.message
    assert {f.reason for f in out.findings} == {"DriftAboveThreshold"}
    assert len(out.findings) == 2 and all("drift=1.0000%" in f.observed for f in out.findings)


async def test_warn_band_and_unknown_rule_against_real_prometheus(prometheus: str) -> None:
    raw = "sum by (job, route) (requests_total)"
    warn = await run_metric_drift(
        MetricDriftSpec(
            prometheus,
            (RecordingRule("job:requests:skewed", expr=raw),),
            threshold=0.02,
            warn_threshold=0.005,
        )
    )
    assert (warn.outcome, warn.reason) == (Verdict.WARN, "MetricDriftInWarnBand"), warn
    missing = await run_metric_drift(MetricDriftSpec(prometheus, (RecordingRule("job:nope"),)))
    assert (missing.outcome, missing.reason) == (Verdict.INCONCLUSIVE, "RecordingRuleNotFound")
    assert "job:nope" in missing.message


async def test_nan_against_nan_compares_nothing(prometheus: str) -> None:
    """Issue 33 item 7: a 0 / 0 rule against the same 0 / 0 expression read ``Pass 0 %``."""
    out = await run_metric_drift(MetricDriftSpec(prometheus, (RecordingRule(IDLE, expr=IDLE_EXPR),)))
    assert (out.outcome, out.reason) == (Verdict.INCONCLUSIVE, "NotANumber"), out
    assert "recorded=NaN, raw=NaN" in out.message and 'model="mistral"' in out.message
    assert f"{IDLE}.maxDrift" not in out.observed


async def test_a_drift_at_the_threshold_fails(prometheus: str) -> None:
    """A rule recording 0.1 % too much, at a 0.1 % threshold: at-or-above fails, whatever
    binary rounding of the two samples does to the last digit."""
    raw = "sum by (job, route) (requests_total)"
    spec = MetricDriftSpec(prometheus, (RecordingRule(TENTH, expr=raw),), threshold=0.001)
    out = await run_metric_drift(spec)
    assert (out.outcome, out.reason) == (Verdict.FAIL, "MetricDriftAboveThreshold"), out
    assert "drift 0.1000% >= 0.1000%" in out.message
    assert out.observed[f"{TENTH}.maxDrift"] == "0.1000%"


async def test_prometheuss_own_rules_file_is_no_reference(
    prometheus: str, prometheus_dir: Path, tmp_path: Path
) -> None:
    """Issue 33 item 7: the file Prometheus loaded, given as the reference, vouched for the rule
    it defines (the drifted one passed). Its own file, or a link to it, is no reference; the
    reviewed rules in a checkout of their own are."""
    own = prometheus_dir / "rules.yml"
    link = tmp_path / "rules-link.yml"
    link.symlink_to(own)
    for path in (own, link):
        spec = MetricDriftSpec(prometheus, (RecordingRule(BED_DRIFTED),), reference=RulesFile(path))
        out = await run_metric_drift(spec)
        assert (out.outcome, out.reason) == (Verdict.INCONCLUSIVE, "ReferenceNotIndependent"), out
        assert str(own) in out.message
    reviewed = tmp_path / "reviewed.yml"
    reviewed.write_text(yaml.safe_dump(REVIEWED_GROUPS))
    spec = MetricDriftSpec(prometheus, (RecordingRule(BED_DRIFTED),), reference=RulesFile(reviewed))
    out = await run_metric_drift(spec)
    assert (out.outcome, out.reason) == (Verdict.FAIL, "RuleExpressionChanged"), out
    copy = tmp_path / "copy.yml"  # the loaded file's content elsewhere: judged as a reference
    copy.write_text(own.read_text())
    faithful = MetricDriftSpec(prometheus, (RecordingRule(BED),), reference=RulesFile(copy))
    out = await run_metric_drift(faithful)
    assert (out.outcome, out.reason) == (Verdict.PASS, "RuleLoadedAsReferenced"), out


async def test_own_rules_file_by_a_relative_name_is_no_reference(exporter: int, tmp_path: Path) -> None:
    """Prometheus started in its directory with a relative ``--config.file`` (upstream's
    default is ``prometheus.yml``) names its rules file ``rules.yml`` in /api/v1/rules; the
    check resolves it against the working directory Prometheus reports."""
    (tmp_path / "rules.yml").write_text(RULES)
    (tmp_path / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - rules.yml\n"
        "scrape_configs:\n  - job_name: inference\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{exporter}']\n"
    )
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    with (tmp_path / "prometheus.log").open("wb") as log:
        proc = subprocess.Popen(
            [
                PROMETHEUS,
                "--config.file=prometheus.yml",
                "--storage.tsdb.path=data",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            cwd=tmp_path,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/api/v1/rules", timeout=5) as r:
                    groups = json.load(r)["data"]["groups"]
                if groups and _query(url, BED):  # recorded: a verdict, were the file a reference
                    break
            except OSError:
                pass
            assert proc.poll() is None, (tmp_path / "prometheus.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "no recorded series within 60 s"
            time.sleep(0.3)
        assert groups[0]["file"] == "rules.yml"  # relative: only Prometheus's CWD says where
        spec = MetricDriftSpec(url, (RecordingRule(BED),), reference=RulesFile(tmp_path / "rules.yml"))
        out = await run_metric_drift(spec)
        assert (out.outcome, out.reason) == (Verdict.INCONCLUSIVE, "ReferenceNotIndependent"), out
        assert "(rules.yml in /api/v1/rules)" in out.message
    finally:
        _stop(proc)


# -- an independent reference in the cluster ------------------------------------------------------


@pytest.fixture(scope="module")
def prometheusrule_crd(kubeconfig: Path) -> None:
    stack.kubectl(kubeconfig, "apply", "--server-side", "-f", "-", input_text=PROMETHEUS_RULE_CRD)
    stack.kubectl(
        kubeconfig,
        "wait",
        "--for=condition=Established",
        "crd/prometheusrules.monitoring.coreos.com",
        "--timeout=60s",
    )


@pytest.fixture
def namespace(kubeconfig: Path) -> Iterator[str]:
    name = f"e2e-drift-{uuid.uuid4().hex[:8]}"
    stack.kubectl(kubeconfig, "create", "namespace", name)
    try:
        yield name
    finally:
        stack.kubectl(kubeconfig, "delete", "namespace", name, "--wait=false", check=False)


def _apply(kubeconfig: Path, namespace: str, obj: dict[str, Any]) -> None:
    stack.kubectl(kubeconfig, "-n", namespace, "apply", "-f", "-", input_text=yaml.safe_dump(obj))


# the reviewed rules, as their authors wrote them (Prometheus re-prints the faithful one when it
# loads it: the check must compare by meaning, not text)
REVIEWED_GROUPS = {
    "groups": [
        {
            "name": "bed",
            "interval": "1s",
            "rules": [
                {"record": BED, "expr": "sum(requests_total) by (route)"},
                {"record": BED_DRIFTED, "expr": REVIEWED},
            ],
        }
    ]
}


async def _drift_row(
    prometheus: str, api: client.ApiClient, namespace: str, record: str, reference: dict[str, Any]
) -> CheckOutcome:
    entry = {"prometheusUrl": prometheus, "rules": [{"record": record}], "reference": reference}
    planned = plan_checks({"healthProbe": {"enabled": False}, "metricDrift": entry})
    [row] = await run_checks(planned, CheckContext(namespace, api_client=api))
    return row


async def test_a_rule_loaded_other_than_its_prometheusrule_fails_and_a_faithful_one_passes(
    prometheus: str, prometheusrule_crd: None, kubeconfig: Path, api: client.ApiClient, namespace: str
) -> None:
    _apply(
        kubeconfig,
        namespace,
        {
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "PrometheusRule",
            "metadata": {"name": "bed", "labels": {"team": "inference"}},
            "spec": REVIEWED_GROUPS,
        },
    )
    by_name = {"prometheusRules": {"name": "bed"}}
    drifted = await _drift_row(prometheus, api, namespace, BED_DRIFTED, by_name)
    assert (drifted.outcome, drifted.reason) == (Verdict.FAIL, "RuleExpressionChanged"), drifted
    loaded = "sum by (route) (requests_total) * 1.005"  # as Prometheus reports it
    assert BED_DRIFTED in drifted.message
    assert f"`{loaded}`" in drifted.message and f"`{REVIEWED}`" in drifted.message
    assert f"PrometheusRule {namespace}/bed" in drifted.message
    # and the figure, measured against the PrometheusRule's expression (never the loaded one)
    assert drifted.observed[f"{BED_DRIFTED}.maxDrift"] == "0.5000%", drifted.observed
    faithful = await _drift_row(
        prometheus, api, namespace, BED, {"prometheusRules": {"selector": {"team": "inference"}}}
    )
    assert (faithful.outcome, faithful.reason) == (Verdict.PASS, "RuleLoadedAsReferenced"), faithful
    assert faithful.observed[f"{BED}.maxDrift"] == "0.0000%"
    assert faithful.observed[f"{BED}.reference"] == f"PrometheusRule {namespace}/bed"
    absent = await _drift_row(prometheus, api, namespace, BED, {"prometheusRules": {"name": "absent"}})
    assert (absent.outcome, absent.reason) == (Verdict.INCONCLUSIVE, "ReferenceNotFound"), absent


async def test_a_rules_file_in_a_configmap_is_a_reference_too(
    prometheus: str, kubeconfig: Path, api: client.ApiClient, namespace: str
) -> None:
    _apply(
        kubeconfig,
        namespace,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "prometheus-rules"},
            "data": {"bed.rules.yaml": yaml.safe_dump(REVIEWED_GROUPS)},
        },
    )
    ref = {"configMap": {"name": "prometheus-rules", "key": "bed.rules.yaml"}}
    faithful = await _drift_row(prometheus, api, namespace, BED, ref)
    assert (faithful.outcome, faithful.reason) == (Verdict.PASS, "RuleLoadedAsReferenced"), faithful
    drifted = await _drift_row(prometheus, api, namespace, BED_DRIFTED, ref)
    assert (drifted.outcome, drifted.reason) == (Verdict.FAIL, "RuleExpressionChanged"), drifted
    assert f"ConfigMap {namespace}/prometheus-rules[bed.rules.yaml]" in drifted.message
