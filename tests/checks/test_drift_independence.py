"""Which file Prometheus reports is the reference file itself: by identity on this machine, not
by name or content."""

from __future__ import annotations

from pathlib import Path

from mcp_checks.drift.independence import loaded_file, needs_cwd, resolved


def test_the_reference_is_found_among_the_loaded_files_by_identity(tmp_path: Path) -> None:
    ref = tmp_path / "rules.yml"
    ref.write_text("groups: []\n")
    copy = tmp_path / "copy.yml"
    copy.write_text(ref.read_text())
    link = tmp_path / "link.yml"
    link.symlink_to(ref)
    (tmp_path / "sub").mkdir()
    assert loaded_file(ref, [str(ref)], None) == str(ref)
    assert loaded_file(ref, ["", str(copy), str(link)], None) == str(link)  # the link, not the copy
    assert loaded_file(ref, [str(copy)], None) is None  # same content, another file
    assert loaded_file(ref, [str(tmp_path / "absent.yml")], None) is None
    assert loaded_file(ref, [f"{tmp_path}/./sub/../rules.yml"], None) is not None  # another spelling
    assert loaded_file(ref, ["rules.yml"], str(tmp_path)) == "rules.yml"
    assert loaded_file(ref, ["rules.yml"], None) is None  # relative, and no working directory
    assert loaded_file(ref, ["rules.yml"], "relative/dir") is None
    assert loaded_file(ref, [], str(tmp_path)) is None


def test_relative_names_need_prometheuss_working_directory() -> None:
    assert needs_cwd(["/etc/prometheus/rules.yml", "rules.yml"])
    assert not needs_cwd(["/etc/prometheus/rules.yml", ""])
    assert resolved("/a/b.yml", None) == Path("/a/b.yml")
    assert resolved("b.yml", "/srv") == Path("/srv/b.yml")
    assert resolved("b.yml", None) is None and resolved("b.yml", "") is None
