"""The harness's ``mcp-devcluster`` command: wiring and argument errors (no cluster started)."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest
from tests.devcluster.clusterstates import recorded_state

from mcp_devcluster import build, cli
from mcp_devcluster.cli import build_parser, main
from mcp_devcluster.cluster import ClusterState


@pytest.mark.parametrize(
    "argv",
    [[], ["bogus"], ["up", "--state-dir"], ["demo", "--timeout", "soon"], ["build", "kubernetes", "k8s"]],
)
def test_parser_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert "usage: mcp-devcluster" in capsys.readouterr().err


def test_every_subcommand_is_wired() -> None:
    parser = build_parser()
    for action in ("build", "up", "down", "env", "status"):
        args = parser.parse_args([action])
        assert args.action == action and callable(args.func)
    assert parser.parse_args(["build", "kubernetes", "etcd"]).components == ["kubernetes", "etcd"]
    stress = parser.parse_args(["stress", "--runs", "2", "--no-hog", "--", "-q", "-m", "timing"])
    assert stress.runs == 2 and stress.no_hog and not stress.no_cluster and callable(stress.func)
    assert stress.pytest_args == ["--", "-q", "-m", "timing"]  # the -- is dropped when it runs
    demo = parser.parse_args(["demo", "--keep", "--timeout", "12"])
    assert demo.keep is True and demo.timeout == 12.0 and callable(demo.func)
    assert parser.parse_args(["up", "--real-node"]).real_node is True
    assert parser.parse_args(["up"]).real_node is False
    assert parser.parse_args(["realnode", "up"]).action == "up"


def test_a_real_node_beside_a_loopback_cluster_says_what_its_pods_cannot_reach(tmp_path: Path) -> None:
    from mcp_devcluster.realnode import lifecycle, node

    def cluster(service_cidr: str, server: str) -> ClusterState:
        return ClusterState(
            state_dir=str(tmp_path),
            kubeconfig="",
            server=server,
            etcd_port=0,
            apiserver_port=0,
            pids={},
            started_at=0.0,
            startup_seconds={},
            service_cidr=service_cidr,
        )

    note = lifecycle.pod_network_note(cluster("127.16.0.0/16", "https://127.0.0.1:6443"))
    assert note is not None and "127.16.0.0/16" in note and "mcp-devcluster up --real-node" in note
    assert lifecycle.pod_network_note(cluster(node.SERVICE_CIDR, f"https://{node.NODE_IP}:6443")) is None


def test_status_without_a_cluster_says_so(tmp_path: object, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "--state-dir", str(tmp_path)]) == 1
    assert "no cluster recorded" in capsys.readouterr().err


def _recorded(state_dir: Path) -> None:
    recorded_state(state_dir).save()


def test_env_puts_the_built_kubectl_first_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``eval "$(mcp-devcluster env)"`` runs the kubectl built with the API server (v1.36), not
    an older one earlier on the user's PATH."""
    monkeypatch.setenv("MCP_OPERATOR_CACHE", str(tmp_path / "my cache"))  # a space: quoted
    kubectl = build.components()["kubernetes"].binary("kubectl")
    assert build.KUBERNETES_VERSION in str(kubectl)
    kubectl.parent.mkdir(parents=True)
    kubectl.write_text("#!/bin/sh\necho built\n")
    kubectl.chmod(0o755)
    old = tmp_path / "old"
    old.mkdir()
    (old / "kubectl").write_text("#!/bin/sh\necho old\n")
    (old / "kubectl").chmod(0o755)
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    _recorded(state_dir)

    assert main(["env", "--state-dir", str(state_dir)]) == 0
    printed = capsys.readouterr().out
    assert printed.splitlines() == [
        f"export KUBECONFIG={state_dir / 'kubeconfig'}",
        f'export PATH={shlex.quote(str(kubectl.parent))}:"$PATH"',
    ]
    shell = subprocess.run(
        ["sh", "-c", 'eval "$1"; kubectl; printf "%s\\n" "$KUBECONFIG"', "sh", printed],
        env={**os.environ, "PATH": f"{old}:{os.environ['PATH']}"},
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert shell.stdout.splitlines() == ["built", str(state_dir / "kubeconfig")]


def test_env_without_a_built_kubectl_leaves_path_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MCP_OPERATOR_CACHE", str(tmp_path / "empty-cache"))
    _recorded(tmp_path)
    assert main(["env", "--state-dir", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert out == f"export KUBECONFIG={tmp_path / 'kubeconfig'}\n"
    assert "is not built" in err and not (tmp_path / "empty-cache").exists()  # nothing was built


def test_up_local_only_starts_no_simulated_node_and_prints_what_env_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``up --local-only`` is the quick start's cluster: the process nodes alone, so no kwok is
    built; either way ``up`` prints the lines ``env`` prints, to be eval'ed."""
    monkeypatch.setenv("MCP_OPERATOR_CACHE", str(tmp_path / "empty-cache"))
    _recorded(tmp_path)
    made: list[object] = []

    class Recorder:
        def __init__(self, state_dir: Path, *, nodes: object = None) -> None:
            made.append(nodes)

        def up(self) -> ClusterState:
            return ClusterState.load(tmp_path)

    monkeypatch.setattr(cli, "DevCluster", Recorder)
    assert main(["up", "--local-only", "--state-dir", str(tmp_path)]) == 0
    assert main(["up", "--state-dir", str(tmp_path)]) == 0
    assert made == [[], None]  # none simulated; then the default nodes
    out = capsys.readouterr().out
    assert out == 2 * f"export KUBECONFIG={tmp_path / 'kubeconfig'}\n"


def test_env_gives_an_operator_run_by_hand_the_free_ports_up_chose(tmp_path: Path) -> None:
    state = recorded_state(
        tmp_path, operator_liveness="http://127.0.0.1:41001/healthz", operator_metrics_port=41002
    )
    lines = cli.env_exports(state).splitlines()
    assert "export MCP_LIVENESS=http://127.0.0.1:41001/healthz MCP_METRICS_PORT=41002" in lines
    state.operator_liveness = ""  # a state written before the ports were recorded: no such line
    assert not any("MCP_LIVENESS" in line for line in cli.env_exports(state).splitlines())
