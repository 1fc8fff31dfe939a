"""The harness's ``mcp-devcluster`` command: wiring and argument errors (no cluster started)."""

from __future__ import annotations

import pytest

from mcp_devcluster.cli import build_parser, main


@pytest.mark.parametrize("argv", [[], ["bogus"], ["up", "--state-dir"], ["demo", "--timeout", "soon"]])
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
    demo = parser.parse_args(["demo", "--keep", "--timeout", "12"])
    assert demo.keep is True and demo.timeout == 12.0 and callable(demo.func)


def test_status_without_a_cluster_says_so(tmp_path: object, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "--state-dir", str(tmp_path)]) == 1
    assert "no cluster recorded" in capsys.readouterr().err
