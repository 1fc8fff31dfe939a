"""``mcp-check``'s usage errors: each is exit 2 with argparse's usage line and a message naming
the flag, before any check runs (nothing here dials anything); the one exit-code table in
``--help``; and start-up: ``--help`` and usage errors load none of the checks' dependencies."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcp_checks import cli, cliplan
from mcp_checks.exitcodes import TITLE, ExitCode, for_verdict

URL = ("--url", "http://127.0.0.1:1")
CSDS = ("--csds", "127.0.0.1:1")
PROM = ("--prometheus", "http://127.0.0.1:1", "--rule", "job:up:sum")


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        # no source given at all
        (["health"], "--url"),
        (["xds"], "--csds"),
        (["drift", "--rule", "r"], "--prometheus"),
        (["drift", "--prometheus", "http://127.0.0.1:1"], "--rule"),
        (["config", "--configmap", "c"], "--deployment"),
        (["config", "--deployment", "web"], "--configmap"),
        (["all"], "-f"),
        # addresses: a scheme for URLs, a port for CSDS (gRPC would dial 443)
        (["xds", "--csds", "localhost"], "argument --csds"),
        (["xds", "--csds", "http://127.0.0.1:1"], "argument --csds"),
        (["xds", "--csds", "127.0.0.1:70000"], "argument --csds"),
        (["xds", "--syncz", "istiod:15014"], "argument --syncz"),
        (["xds", "--envoy-admin", "pod:15000"], "argument --envoy-admin"),
        (["drift", "--prometheus", "localhost:9090", "--rule", "r"], "argument --prometheus"),
        (["drift", "--prometheus", "http://:9090", "--rule", "r"], "argument --prometheus"),
        (["health", "--url", "localhost:8080"], "argument --url"),
        (["health", *URL, "--path", "health"], "argument --path"),
        # ratios
        (["drift", *PROM, "--threshold", "2"], "argument --threshold"),
        (["drift", *PROM, "--threshold", "0"], "argument --threshold"),
        (["drift", *PROM, "--threshold", "nan"], "argument --threshold"),
        (["health", *URL, "--min-success-ratio", "2"], "argument --min-success-ratio"),
        (["health", *URL, "--min-success-ratio", "0.3"], "argument --min-success-ratio"),
        # durations
        (["xds", *CSDS, "--grace-seconds", "-5"], "argument --grace-seconds"),
        (["xds", *CSDS, "--grace-seconds", "2h"], "argument --grace-seconds"),
        (["xds", *CSDS, "--wait", "0"], "argument --wait"),
        (["xds", *CSDS, "--wait", "soon"], "argument --wait"),
        (["health", *URL, "--timeout-ms", "0"], "argument --timeout-ms"),
        (["health", *URL, "--max-p99-ms", "-1"], "argument --max-p99-ms"),
        (["health", *URL, "--max-p50-ms", "0"], "argument --max-p50-ms"),
        (["health", *URL, "--max-round-ms", "x"], "argument --max-round-ms"),
        (["health", *URL, "--warn-p99-ms", "inf"], "argument --warn-p99-ms"),
        (["health", *URL, "--max-prober-lag-ms", "20000"], "argument --max-prober-lag-ms"),
        # counts
        (["health", *URL, "--requests", "0"], "argument --requests"),
        (["health", *URL, "--requests", "1.5"], "argument --requests"),
        (["health", *URL, "--concurrency", "1000"], "argument --concurrency"),
        (["health", *URL, "--expected-status", "99"], "argument --expected-status"),
        # files, and the drift reference's forms
        (["health", "-f", "/no/such/gate.yaml"], "argument -f/--file"),
        (["health", *URL, "--kubeconfig", "/no/such/kubeconfig"], "argument --kubeconfig"),
        (["health", *URL, "--junit", "/no/such/dir/report.xml"], "argument --junit"),
        (["drift", *PROM, "--reference-file", "/no/such/rules.yaml"], "argument --reference-file"),
        (["drift", *PROM, "--rule", "=up"], "argument --rule"),
        (["drift", *PROM, "--reference-configmap", "ns/only-two"], "argument --reference-configmap"),
        (["drift", *PROM, "--reference-prometheusrules", "/x"], "argument --reference-prometheusrules"),
        (["drift", *PROM, "--reference-selector", "team"], "argument --reference-selector"),
        (["drift", *PROM, "--reference-selector", "team=a"], "--reference-selector"),
        (
            ["drift", *PROM, "--reference-prometheusrules", "ns/one", "--reference-selector", "team=a"],
            "--reference-selector",
        ),
    ],
)
def test_a_usage_error_exits_2_and_names_the_flag(
    argv: list[str], flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(argv)
    err = capsys.readouterr().err
    assert exited.value.code == ExitCode.USAGE == 2, err
    assert f"usage: mcp-check {argv[0]}" in err, err  # argparse's parser.error, of the subcommand
    assert f"mcp-check {argv[0]}: error: " in err and flag in err.split("error: ", 1)[1], err


def test_no_subcommand_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main([])
    assert exited.value.code == 2
    assert "usage: mcp-check" in capsys.readouterr().err


def test_a_kubeconfig_that_is_no_kubeconfig_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "kubeconfig"
    bad.write_text("just text\n")
    with pytest.raises(SystemExit) as exited:
        cli.main(["xds", *CSDS, "--kubeconfig", str(bad)])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and "argument --kubeconfig" in err and "not a usable kubeconfig" in err


def test_a_manifest_that_is_no_manifest_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "gate.yaml"
    path.write_text("kind: ConfigMap\n")
    with pytest.raises(SystemExit) as exited:
        cli.main(["all", "-f", str(path)])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and "argument -f/--file" in err and "expected one MCPReadiness" in err


def test_what_a_manifest_gives_no_flag_is_needed_for(tmp_path: Path) -> None:
    """The required values may come from -f: a manifest's Prometheus and rules make `drift`
    without flags; a flag given beside it wins."""
    path = tmp_path / "gate.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "kind": "MCPReadiness",
                "metadata": {"name": "gate", "namespace": "ml"},
                "spec": {
                    "target": {"url": "http://t"},
                    "checks": {
                        "metricDrift": {"prometheusUrl": "http://p:9090", "rules": [{"record": "r"}]},
                        "xdsSync": {"sources": [{"kind": "csds", "address": "cp:18000"}]},
                    },
                },
            }
        )
    )
    parser = cli.build_parser()
    manifest = cliplan.read_manifest(path)
    checks, url, namespace = cliplan.plan(
        parser.parse_args(["drift", "-f", str(path), "--threshold", "0.01"]), manifest
    )
    drift = checks["metricDrift"]
    assert (drift["prometheusUrl"], drift["threshold"]) == ("http://p:9090", 0.01)
    assert "enabled" not in drift  # not a field of metricDrift: the strict model would refuse it
    assert checks["healthProbe"] == {"enabled": False} and (url, namespace) == ("http://t", "ml")
    checks, _, _ = cliplan.plan(parser.parse_args(["xds", "-f", str(path), "--grace-seconds", "0"]), manifest)
    assert checks["xdsSync"]["graceSeconds"] == 0.0


def test_values_in_range_are_taken() -> None:
    args = cli.build_parser().parse_args(
        [
            "xds",
            "--csds",
            "[::1]:15010",
            "--syncz",
            "https://istiod:15014/",
            "--grace-seconds",
            "1m",
            "--wait",
            "1h",
        ]
    )
    assert args.csds == ["[::1]:15010"] and args.syncz == ["https://istiod:15014/"]
    assert (args.grace_seconds, args.wait) == (60.0, 3600.0)
    args = cli.build_parser().parse_args(
        ["drift", *PROM, "--threshold", "1", "--reference-prometheusrules", "monitoring"]
    )
    assert args.threshold == 1.0 and args.reference_prometheusrules == "monitoring"
    args = cli.build_parser().parse_args(
        ["health", *URL, "--min-success-ratio", "0.5", "--requests", "100000", "--expected-status", "204"]
    )
    assert (args.min_success_ratio, args.requests, args.expected_status) == (0.5, 100000, [204])


# --- one exit-code table -------------------------------------------------------------------


def test_one_exit_code_table_for_the_checks_and_the_gate(capsys: pytest.CaptureFixture[str]) -> None:
    assert [int(c) for c in ExitCode] == [0, 1, 2, 3, 4]
    assert [for_verdict(v) for v in ("Pass", "Warn", "Fail", "Inconclusive", "Error")] == [0, 0, 1, 3, 3]
    helps = []
    for argv in (["--help"], ["gate", "--help"], ["xds", "--help"]):
        with pytest.raises(SystemExit) as exited:
            cli.main(argv)
        assert exited.value.code == 0
        helps.append(capsys.readouterr().out)
    for text in helps:
        table = text.split(TITLE, 1)[1]
        for code in ExitCode:
            assert f"\n  {int(code)}  " in table, text
        assert "Inconclusive or Error" in table and "--timeout" in table


# --- start-up -------------------------------------------------------------------------------

HEAVY = (
    "aiohttp",
    "grpc",
    "google.protobuf",
    "kubernetes",
    "requests",
    "urllib3",
    "prometheus_api_client",
    "prometheus_client",
    "pydantic",
    "rich",
    "yaml",
    "asyncio",
    "mcp_checks.suite",
)
PROBE = f"""
import json, sys
from mcp_checks import cli
try:
    code = cli.main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
loaded = sorted(m for m in {HEAVY!r} if m in sys.modules)
print("LOADED=" + json.dumps(loaded), file=sys.stderr)
sys.exit(code)
"""


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["--help"], 0),
        (["gate", "--help"], 0),
        (["drift", "--help"], 0),
        (["xds", *CSDS, "--grace-seconds", "-5"], 2),  # a bad value
        (["drift", "--rule", "r"], 2),  # a flag missing
        (["gate", "mcpreadiness/x", "--timeout", "soon"], 2),
    ],
)
def test_help_and_usage_errors_load_none_of_the_checks_dependencies(argv: list[str], code: int) -> None:
    """The property behind a fast `mcp-check --help`: importing the CLI and answering --help or
    a usage error imports none of the checks' dependencies (each costs tenths of a second)."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == code, done.stderr
    line = next(x for x in done.stderr.splitlines() if x.startswith("LOADED="))
    assert json.loads(line.removeprefix("LOADED=")) == [], done.stderr
    if code == 0:
        assert "usage: mcp-check" in done.stdout and "exit codes" in done.stdout
    else:
        assert "error: argument" in done.stderr or "is required" in done.stderr


def test_the_installed_command_answers_help() -> None:
    script = Path(sys.executable).parent / "mcp-check"
    if not script.exists():
        pytest.skip(f"{script} is not installed")
    done = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and TITLE in done.stdout


# --- manifests read as strictly as the API server reads them --------------------------------

DRIFT: dict[str, Any] = {"prometheusUrl": "http://127.0.0.1:1", "rules": [{"record": "job:up:sum"}]}
CONFIG: dict[str, Any] = {"workload": {"name": "web"}, "configMaps": ["web-config"]}


def _gate_file(tmp_path: Path, spec: dict[str, Any]) -> Path:
    path = tmp_path / "gate.yaml"
    body = {
        "apiVersion": "mcp2026.io/v1alpha1",
        "kind": "MCPReadiness",
        "metadata": {"name": "g"},
        "spec": spec,
    }
    path.write_text(yaml.safe_dump(body))
    return path


@pytest.mark.parametrize(
    ("checks", "problem"),
    [
        # the typo that fell back to the default 0.9999
        (
            {"healthProbe": {"requests": 10, "minSucessRatio": 0.99}},
            "spec.checks.healthProbe.minSucessRatio: unknown field",
        ),
        (
            {"configConsistency": {**CONFIG, "configmaps": ["x"]}},
            "spec.checks.configConsistency.configmaps: unknown field",
        ),
        (
            {"configConsistency": {**CONFIG, "workload": {"name": "web", "knd": "StatefulSet"}}},
            "spec.checks.configConsistency.workload.knd: unknown field",
        ),
        (
            {"configConsistency": {**CONFIG, "application": {"name": "a", "expectedRevison": "abc"}}},
            "spec.checks.configConsistency.application.expectedRevison: unknown field",
        ),
        ({"metricDrift": {**DRIFT, "treshold": 0.01}}, "spec.checks.metricDrift.treshold: unknown field"),
        (
            {"metricDrift": {**DRIFT, "rules": [{"record": "r"}, {"record": "s", "exp": "up"}]}},
            "spec.checks.metricDrift.rules[1].exp: unknown field",
        ),
        (
            {
                "metricDrift": {
                    **DRIFT,
                    "reference": {"configMap": {"name": "r", "key": "k", "namepsace": "m"}},
                }
            },
            "spec.checks.metricDrift.reference.configMap.namepsace: unknown field",
        ),
        # a reference file is the CLI's --reference-file, not a field of the API
        (
            {"metricDrift": {**DRIFT, "reference": {"file": "rules.yaml"}}},
            "spec.checks.metricDrift.reference.file: unknown field",
        ),
        ({"metricDrift": {**DRIFT, "enabled": False}}, "spec.checks.metricDrift.enabled: unknown field"),
        ({"healthCheck": {}}, "spec.checks.healthCheck: unknown field"),
        # invalid values, by path too
        (
            {"healthProbe": {"requests": 0}},
            "spec.checks.healthProbe.requests: Input should be greater than or equal to 1, got 0",
        ),
        ({"metricDrift": {**DRIFT, "threshold": "lots"}}, "spec.checks.metricDrift.threshold: "),
        ({"metricDrift": {**DRIFT, "points": 61}}, "spec.checks.metricDrift.points: "),
        (
            {"configConsistency": {**CONFIG, "workload": {"name": "web", "kind": "Job"}}},
            "spec.checks.configConsistency.workload.kind: ",
        ),
        (
            {"configConsistency": {**CONFIG, "timeoutSeconds": 0}},
            "spec.checks.configConsistency.timeoutSeconds: ",
        ),
        ({"metricDrift": {"rules": [{"record": "r"}]}}, "spec.checks.metricDrift.prometheusUrl: required"),
    ],
)
def test_a_manifest_field_the_api_would_refuse_exits_2_naming_its_path(
    checks: dict[str, Any], problem: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`kubectl apply` refuses these; `mcp-check -f` must too, before anything runs, instead of
    running with a default where a threshold was misspelt."""
    path = _gate_file(tmp_path, {"target": {"url": "http://127.0.0.1:1"}, "checks": checks})
    with pytest.raises(SystemExit) as exited:
        cli.main(["all", "-f", str(path)])
    err = capsys.readouterr().err
    assert exited.value.code == ExitCode.USAGE, err
    assert "argument -f/--file" in err and f"\n  {problem}" in err, err


def test_every_problem_of_a_manifest_is_named_also_outside_checks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = {
        "target": {"ulr": "http://127.0.0.1:1"},
        "recheckIntervalSecond": 60,
        "checks": {"healthProbe": {"maxP99ms": 100}},
    }
    with pytest.raises(SystemExit) as exited:
        cli.main(["health", "-f", str(_gate_file(tmp_path, spec))])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and "(3 problems)" in err, err
    for problem in (
        "spec.target.ulr: unknown field",
        "spec.recheckIntervalSecond: unknown field",
        "spec.checks.healthProbe.maxP99ms: unknown field",
    ):
        assert f"\n  {problem}" in err, err
    with pytest.raises(SystemExit) as exited:
        cli.main(["health", "--url", "http://127.0.0.1:1", "-f", str(_gate_file(tmp_path, {"target": {}}))])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and "\n  spec.target: set exactly one of url and serviceRef" in err, err


def test_the_repositorys_manifests_are_valid_to_mcp_check() -> None:
    """Every MCPReadiness the repository ships (samples, examples, the Argo CD hooks) reads
    without a problem: strict, not stricter than the API server."""
    from mcp_checks.manifest import spec_problems

    repo = Path(__file__).resolve().parents[2]
    gates = [
        (path, doc)
        for path in sorted((repo / "manifests").rglob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if isinstance(doc, dict) and doc.get("kind") == "MCPReadiness"
    ]
    assert len(gates) >= 3
    for path, doc in gates:
        assert spec_problems(doc["spec"]) == [], path


def test_more_xds_sources_than_the_api_takes_name_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    from mcp_checks.specs import XdsSync

    limit = next(m.max_length for m in XdsSync.model_fields["sources"].metadata if hasattr(m, "max_length"))
    assert cliplan.MAX_XDS_SOURCES == limit == 16
    csds = [arg for i in range(limit + 1) for arg in ("--csds", f"127.0.0.1:{1000 + i}")]
    with pytest.raises(SystemExit) as exited:
        cli.main(["xds", *csds])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and "error: argument --csds: at most 16 sources (got 17)" in err, err
    mixed = [*csds[:-4], "--syncz", "http://istiod:15014", "--envoy-admin", "http://pod:15000"]
    with pytest.raises(SystemExit) as exited:
        cli.main(["xds", *mixed])
    err = capsys.readouterr().err
    assert "argument --csds/--syncz/--envoy-admin: at most 16 sources in all (got 17)" in err, err
