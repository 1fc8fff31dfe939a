"""The ``mcp-operator`` command: CRD generation and argument errors (no cluster involved)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mcp_operator import crdgen
from mcp_operator.cli import build_parser, main
from mcp_operator.settings import OperatorSettings


def test_crds_writes_every_generated_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = tmp_path / "checkout"
    assert main(["crds", "--repo", str(repo)]) == 0
    crds = sorted(p.name for p in (repo / "crds").iterdir())
    assert crds == ["mcp2026.io_mcpbenchmarks.yaml", "mcp2026.io_mcpreadinesses.yaml"]
    for definition in crdgen.DEFINITIONS:
        text = (repo / "crds" / crdgen.file_name(definition)).read_text()
        assert text == crdgen.render(definition)
        assert yaml.safe_load(text)["kind"] == "CustomResourceDefinition"
    expected = crdgen.generated_files(repo)
    for path, text in expected.items():
        assert path.read_text() == text
    printed = capsys.readouterr().out.split()
    assert sorted(printed) == sorted(str(p) for p in expected)


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["bogus"],
        ["dev-cluster", "up"],
        ["demo"],
        ["crds", "--out", "x"],
        ["run", "--namespace"],
    ],
)
def test_parser_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert "usage: mcp-operator" in capsys.readouterr().err


def test_every_subcommand_is_wired() -> None:
    parser = build_parser()
    for argv in (["crds"], ["run"], ["shard"]):
        args = parser.parse_args(argv)
        assert callable(args.func)
    assert parser.parse_args(["run", "--namespace", "a", "--namespace", "b"]).namespace == ["a", "b"]


def test_console_entry_point_exit_codes(tmp_path: Path) -> None:
    """The installed command, as CI and the README call it."""
    bad = subprocess.run(
        [sys.executable, "-m", "mcp_operator.cli", "no-such-command"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "invalid choice" in bad.stderr
    good = subprocess.run(
        [sys.executable, "-m", "mcp_operator.cli", "crds", "--repo", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert good.returncode == 0, good.stderr
    assert len(list((tmp_path / "crds").glob("*.yaml"))) == 2


def test_crds_refuses_to_write_without_the_docstrings(tmp_path: Path) -> None:
    """The image runs Python with -OO, which drops the docstrings the CRDs' descriptions come
    from: there the command writes nothing rather than CRDs without their descriptions."""
    refused = subprocess.run(
        [sys.executable, "-OO", "-m", "mcp_operator.cli", "crds", "--repo", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2 and "without -OO" in refused.stderr
    assert not (tmp_path / "crds").exists()


def test_settings_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MCP_METRICS_PORT", "MCP_RUNNER_IMAGE", "MCP_RUNNER_COMMAND"):
        monkeypatch.delenv(name, raising=False)
    default = OperatorSettings.from_env()
    assert default.metrics_port == 9090 and default.runner_command == ("mcp-operator", "shard")
    monkeypatch.setenv("MCP_METRICS_PORT", "9191")
    monkeypatch.setenv("MCP_RUNNER_IMAGE", "registry.local/runner:dev")
    monkeypatch.setenv("MCP_RUNNER_COMMAND", "python -m  mcp_operator.cli shard")
    custom = OperatorSettings.from_env()
    assert custom.metrics_port == 9191 and custom.runner_image == "registry.local/runner:dev"
    assert custom.runner_command == ("python", "-m", "mcp_operator.cli", "shard")
