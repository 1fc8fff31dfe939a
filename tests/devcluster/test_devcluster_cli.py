"""The harness's ``mcp-devcluster`` command: wiring and argument errors (no cluster started)."""

from __future__ import annotations

import pytest

from mcp_devcluster.cli import build_parser, main


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


def test_status_without_a_cluster_says_so(tmp_path: object, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "--state-dir", str(tmp_path)]) == 1
    assert "no cluster recorded" in capsys.readouterr().err
