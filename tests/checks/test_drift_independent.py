"""Issue 18 item 5: a rule read back from Prometheus was compared with itself, so a rule recording
0.5 % too much passed at 0.0000 %. Against an HTTP server that answers as Prometheus does for such
a rule: without an independent reference it is never a pass, and with one (a rules file here; the
suite, the CLI) the changed expression fails and the drift is measured against the reference's
expression, not the loaded query."""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from tests.httpserve import send_json

from mcp_checks.cli import main
from mcp_checks.drift import MetricDriftSpec, RecordingRule, RulesFile, run_metric_drift
from mcp_checks.suite import REFERENCE_FILE, CheckContext, SpecError, plan_checks, run_checks
from mcp_checks.verdict import Verdict

RECORD = "route:bed_requests_drifted:rate1m"
FAITHFUL = "sum by (route) (bed_requests_total)"  # what Prometheus prints for the reviewed rule
WRITTEN = "sum(bed_requests_total) by (route)"  # the same rule as its author wrote it
DRIFTED = FAITHFUL + " * 1.005"  # what Prometheus has loaded: 0.5 % too much
PRINTED = {FAITHFUL: FAITHFUL, WRITTEN: FAITHFUL, DRIFTED: DRIFTED}
RAW, RECORDED = 200.0, 201.0  # the raw expression, and the rule's series (0.5 % more)
STAMP = 1_700_000_000.0


class FakePrometheus:
    """``/api/v1/rules`` with the drifted rule (evaluated half a second ago, every second),
    ``/api/v1/query`` for the record, its timestamps, ``time()`` and both expressions, and
    ``/api/v1/format_query`` printing what ``PRINTED`` knows (400 otherwise; 404 when off)."""

    def __init__(self) -> None:
        self.loaded_query = DRIFTED
        self.recorded = RECORDED  # what the rule's series holds
        self.format_query = True
        self.rules_file = "/etc/prometheus/rules.yml"  # the file the group was loaded from
        self.cwd: str | None = None  # /api/v1/status/runtimeinfo's CWD; None: 404
        self.queries: list[str] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self, code: int, body: Any) -> None:
                send_json(self, code, body)

            def do_GET(self) -> None:
                url = urlsplit(self.path)
                params = {k: v[0] for k, v in parse_qs(url.query).items()}
                if url.path == "/api/v1/rules":
                    return self._answer(200, fake.rules())
                if url.path == "/api/v1/status/runtimeinfo" and fake.cwd is not None:
                    return self._answer(200, {"status": "success", "data": {"CWD": fake.cwd}})
                if url.path == "/api/v1/query":
                    fake.queries.append(params["query"])
                    return self._answer(200, fake.query(params["query"]))
                return self._answer(404, {"status": "error"})

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"])).decode()
                query = parse_qs(body)["query"][0]
                if self.path != "/api/v1/format_query" or not fake.format_query:
                    return self._answer(404, {"status": "error"})
                if query not in PRINTED:
                    return self._answer(
                        400, {"status": "error", "errorType": "bad_data", "error": "parse error"}
                    )
                return self._answer(200, {"status": "success", "data": PRINTED[query]})

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    def rules(self) -> dict[str, Any]:
        last = (dt.datetime.now(dt.UTC) - dt.timedelta(seconds=0.5)).isoformat().replace("+00:00", "Z")
        rule = {
            "name": RECORD,
            "query": self.loaded_query,
            "health": "ok",
            "lastEvaluation": last,
            "type": "recording",
        }
        group = {
            "name": "bed",
            "file": self.rules_file,
            "interval": 1,
            "lastEvaluation": last,
            "rules": [rule],
        }
        return {"status": "success", "data": {"groups": [group]}}

    def query(self, promql: str) -> dict[str, Any]:
        def vector(value: float, **labels: str) -> dict[str, Any]:
            sample = {"metric": {"route": "/v1/chat", **labels}, "value": [STAMP, str(value)]}
            return {"status": "success", "data": {"resultType": "vector", "result": [sample]}}

        if promql == "time()":
            now = time.time()
            return {"status": "success", "data": {"resultType": "scalar", "result": [now, str(now)]}}
        if promql == RECORD:
            return vector(self.recorded, __name__=RECORD)
        if promql == f"timestamp({RECORD})":
            return vector(STAMP)
        if PRINTED.get(promql) == FAITHFUL or " ".join(promql.split()) == FAITHFUL:
            return vector(RAW)
        if promql == DRIFTED:
            return vector(RECORDED)
        raise AssertionError(f"unexpected query {promql}")


@pytest.fixture
def prom() -> Iterator[FakePrometheus]:
    fake = FakePrometheus()
    thread = threading.Thread(target=fake.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        fake.server.shutdown()
        fake.server.server_close()


def reference(tmp_path: Path, expr: str = WRITTEN) -> Path:
    path = tmp_path / "rules.yaml"
    rule = f"      - record: {RECORD}\n        expr: {expr}\n"
    path.write_text("groups:\n  - name: bed\n    interval: 1s\n    rules:\n" + rule)
    return path


async def test_a_rule_only_prometheus_describes_is_never_a_pass(prom: FakePrometheus) -> None:
    out = await run_metric_drift(MetricDriftSpec(prom.url, (RecordingRule(RECORD),)))
    assert (out.outcome, out.reason) == (Verdict.INCONCLUSIVE, "NoIndependentReference"), out.message
    assert RECORD in out.message and "expr" in out.message and "--reference-file" in out.message
    assert DRIFTED not in prom.queries  # the loaded query is never evaluated as the raw side
    prom.loaded_query = FAITHFUL  # a faithful rule is no different: nothing independent vouches for it
    out = await run_metric_drift(MetricDriftSpec(prom.url, (RecordingRule(RECORD),)))
    assert (out.outcome, out.reason) == (Verdict.INCONCLUSIVE, "NoIndependentReference")


async def test_the_users_expr_is_still_an_independent_reference(prom: FakePrometheus) -> None:
    out = await run_metric_drift(MetricDriftSpec(prom.url, (RecordingRule(RECORD, expr=FAITHFUL),)))
    assert (out.outcome, out.reason) == (Verdict.FAIL, "MetricDriftAboveThreshold"), out.message
    assert "drift 0.5000% >= 0.3000%" in out.message


async def test_a_reference_catches_the_changed_expression_and_measures_against_itself(
    prom: FakePrometheus, tmp_path: Path
) -> None:
    spec = MetricDriftSpec(prom.url, (RecordingRule(RECORD),), reference=RulesFile(reference(tmp_path)))
    out = await run_metric_drift(spec)
    assert (out.outcome, out.reason) == (Verdict.FAIL, "RuleExpressionChanged"), out.message
    assert f"`{DRIFTED}`" in out.message and f"`{WRITTEN}`" in out.message and RECORD in out.message
    assert "drift 0.5000% >= 0.3000%" in out.message  # the figure too: raw side is the reference's expression
    assert out.observed[f"{RECORD}.maxDrift"] == "0.5000%"
    assert WRITTEN in prom.queries and DRIFTED not in prom.queries
    assert {f.reason for f in out.findings} == {"RuleExpressionChanged", "DriftAboveThreshold"}


async def test_a_faithful_rule_with_a_matching_reference_passes(prom: FakePrometheus, tmp_path: Path) -> None:
    prom.loaded_query, prom.recorded = FAITHFUL, RAW
    spec = MetricDriftSpec(prom.url, (RecordingRule(RECORD),), reference=RulesFile(reference(tmp_path)))
    out = await run_metric_drift(spec)
    assert (out.outcome, out.reason) == (Verdict.PASS, "RuleLoadedAsReferenced"), out.message
    assert out.observed[f"{RECORD}.reference"] == str(tmp_path / "rules.yaml")
    assert out.observed[f"{RECORD}.maxDrift"] == "0.0000%"


async def test_without_format_query_expressions_compare_as_text_and_say_so(
    prom: FakePrometheus, tmp_path: Path
) -> None:
    prom.format_query = False  # a Prometheus older than 2.32
    prom.loaded_query, prom.recorded = FAITHFUL, RAW
    spaced = MetricDriftSpec(
        prom.url,
        (RecordingRule(RECORD),),
        reference=RulesFile(reference(tmp_path, "sum by (route)  (bed_requests_total)")),
    )
    out = await run_metric_drift(spaced)  # the same text but for spaces: not a change
    assert out.outcome == Verdict.PASS, out.message
    assert "no /api/v1/format_query" in out.observed[f"{RECORD}.comparison"]
    reordered = MetricDriftSpec(prom.url, (RecordingRule(RECORD),), reference=RulesFile(reference(tmp_path)))
    out = await run_metric_drift(reordered)  # the same rule, but only Prometheus's printer could tell
    assert (out.outcome, out.reason) == (Verdict.FAIL, "RuleExpressionChanged")
    assert (
        "compared as whitespace-normalised text (this Prometheus has no /api/v1/format_query)" in out.message
    )


async def test_reference_problems_are_rows_never_passes(prom: FakePrometheus, tmp_path: Path) -> None:
    absent = MetricDriftSpec(
        prom.url, (RecordingRule(RECORD),), reference=RulesFile(tmp_path / "absent.yaml")
    )
    out = await run_metric_drift(absent)
    assert (out.outcome, out.reason) == (Verdict.INCONCLUSIVE, "ReferenceNotFound")
    (tmp_path / "junk.yaml").write_text("- not rules\n")
    junk = MetricDriftSpec(prom.url, (RecordingRule(RECORD),), reference=RulesFile(tmp_path / "junk.yaml"))
    out = await run_metric_drift(junk)
    assert (out.outcome, out.reason) == (Verdict.ERROR, "ReferenceMalformed")
    other = MetricDriftSpec(prom.url, (RecordingRule("job:other"),), reference=RulesFile(reference(tmp_path)))
    out = await run_metric_drift(other)
    assert (out.outcome, out.reason) == (Verdict.INCONCLUSIVE, "RuleNotInReference")


async def test_the_suite_reads_the_reference_named_in_the_entry(prom: FakePrometheus, tmp_path: Path) -> None:
    entry = {"prometheusUrl": prom.url, "rules": [{"record": RECORD}]}
    from_file = {**entry, REFERENCE_FILE: str(reference(tmp_path))}  # mcp-check's --reference-file
    [row] = await run_checks(
        plan_checks({"healthProbe": {"enabled": False}, "metricDrift": from_file}), CheckContext("ns")
    )
    assert (row.outcome, row.reason) == (Verdict.FAIL, "RuleExpressionChanged"), row.message
    in_cluster = {**entry, "reference": {"prometheusRules": {"name": "bed"}}}
    [row] = await run_checks(
        plan_checks({"healthProbe": {"enabled": False}, "metricDrift": in_cluster}), CheckContext("ns")
    )
    assert (row.outcome, row.reason) == (Verdict.ERROR, "CheckMisconfigured")  # no Kubernetes client
    assert "needs a Kubernetes client" in row.message


@pytest.mark.parametrize(
    "ref",
    [
        {"prometheusRules": {"name": "a"}, "configMap": {"name": "b", "key": "c"}},
        {"configMap": {"name": "b"}},
        {"prometheusRules": {"name": "a", "selector": {"team": "x"}}},
        {"prometheusRules": "a"},
    ],
)
def test_a_malformed_reference_is_a_spec_error(ref: dict[str, Any]) -> None:
    with pytest.raises(SpecError, match="reference"):
        plan_checks(
            {"metricDrift": {"prometheusUrl": "http://p", "rules": [{"record": "r"}], "reference": ref}}
        )


def test_the_cli_takes_a_reference_file(
    prom: FakePrometheus, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = reference(tmp_path)
    code = main(["drift", "--prometheus", prom.url, "--rule", RECORD, "--json"])
    assert code == 3  # Inconclusive: NoIndependentReference
    assert json.loads(capsys.readouterr().out)["checks"][0]["reason"] == "NoIndependentReference"
    code = main(
        ["drift", "--prometheus", prom.url, "--rule", RECORD, "--reference-file", str(path), "--json"]
    )
    row = json.loads(capsys.readouterr().out)["checks"][0]
    assert code == 1 and row["reason"] == "RuleExpressionChanged", row
    for bad in (["--reference-configmap", "ns/only-two"], ["--reference-selector", "a=b"]):
        with pytest.raises(SystemExit) as exited:  # a usage error, argparse's way
            main(["drift", "--prometheus", prom.url, "--rule", RECORD, *bad])
        assert exited.value.code == 2 and bad[0] in capsys.readouterr().err


# -- issue 33 item 7: Prometheus's own rules file is not a reference ---------------------------------


async def test_prometheuss_own_rules_file_is_not_an_independent_reference(
    prom: FakePrometheus, tmp_path: Path
) -> None:
    """The reference file is the very file Prometheus reports loading the rule from: its rules
    are the ones under test, so a faithful-looking match proves nothing (it passed before)."""
    prom.loaded_query, prom.recorded = FAITHFUL, RAW
    path = reference(tmp_path)
    prom.rules_file = str(path)
    spec = MetricDriftSpec(prom.url, (RecordingRule(RECORD),), reference=RulesFile(path))
    out = await run_metric_drift(spec)
    assert (out.outcome, out.reason) == (Verdict.INCONCLUSIVE, "ReferenceNotIndependent"), out.message
    assert str(path) in out.message and RECORD in out.message and "GitOps" in out.message
    assert not any(key.endswith(".maxDrift") for key in out.observed)  # nothing measured against it
    prom.loaded_query, prom.recorded = DRIFTED, RECORDED  # and a drifted rule: still no verdict from it
    assert (await run_metric_drift(spec)).reason == "ReferenceNotIndependent"


async def test_the_same_file_by_another_name_is_still_prometheuss_own(
    prom: FakePrometheus, tmp_path: Path
) -> None:
    prom.loaded_query, prom.recorded = FAITHFUL, RAW
    path = reference(tmp_path)
    link = tmp_path / "mounted" / "rules.yaml"  # a ConfigMap volume's ..data symlink, say
    link.parent.mkdir()
    link.symlink_to(path)
    prom.rules_file = str(link)
    spec = MetricDriftSpec(prom.url, (RecordingRule(RECORD),), reference=RulesFile(path))
    assert (await run_metric_drift(spec)).reason == "ReferenceNotIndependent"
    prom.rules_file, prom.cwd = "rules.yaml", str(tmp_path)  # relative to Prometheus's working directory
    assert (await run_metric_drift(spec)).reason == "ReferenceNotIndependent"
    prom.cwd = str(tmp_path / "mounted")
    assert (await run_metric_drift(spec)).reason == "ReferenceNotIndependent"  # through the link
    prom.cwd = None  # a relative name and no working directory: nothing says it is this file
    out = await run_metric_drift(spec)
    assert (out.outcome, out.reason) == (Verdict.PASS, "RuleLoadedAsReferenced"), out.message


async def test_a_copy_from_the_reviewed_source_is_independent(prom: FakePrometheus, tmp_path: Path) -> None:
    """The same rules in another file (the GitOps checkout) are what Prometheus should have loaded."""
    prom.loaded_query, prom.recorded = FAITHFUL, RAW
    loaded = reference(tmp_path)
    prom.rules_file = str(loaded)
    checkout = tmp_path / "gitops"
    checkout.mkdir()
    spec = MetricDriftSpec(prom.url, (RecordingRule(RECORD),), reference=RulesFile(reference(checkout)))
    out = await run_metric_drift(spec)
    assert (out.outcome, out.reason) == (Verdict.PASS, "RuleLoadedAsReferenced"), out.message


async def test_prometheuss_rules_api_answer_written_down_is_not_a_reference(
    prom: FakePrometheus, tmp_path: Path
) -> None:
    prom.loaded_query, prom.recorded = FAITHFUL, RAW
    answer = prom.rules()
    for name, doc in (("answer.json", answer), ("data.yaml", answer["data"])):
        path = tmp_path / name
        path.write_text(json.dumps(doc))
        spec = MetricDriftSpec(prom.url, (RecordingRule(RECORD),), reference=RulesFile(path))
        out = await run_metric_drift(spec)
        assert (out.outcome, out.reason) == (Verdict.INCONCLUSIVE, "ReferenceNotIndependent"), out.message
        assert "/api/v1/rules answer" in out.message


async def test_a_rule_with_its_own_expr_needs_no_reference_file_check(
    prom: FakePrometheus, tmp_path: Path
) -> None:
    """The rule's expr is the reference: the reference file (Prometheus's own) is not read for it."""
    path = reference(tmp_path)
    prom.rules_file = str(path)
    rules = (RecordingRule(RECORD, expr=FAITHFUL),)
    out = await run_metric_drift(MetricDriftSpec(prom.url, rules, reference=RulesFile(path)))
    assert (out.outcome, out.reason) == (Verdict.FAIL, "MetricDriftAboveThreshold"), out.message
