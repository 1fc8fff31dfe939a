"""Control-plane build: wrapper go.mod generation, version ldflags and the versioned cache."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from mcp_devcluster import argocd, build
from mcp_devcluster.realnode import dns


def _go_mod_cache() -> Path | None:
    if shutil.which("go") is None:
        return None
    out = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True, timeout=30, check=False)
    return Path(out.stdout.strip()) if out.returncode == 0 and out.stdout.strip() else None


@pytest.fixture(scope="module")
def kubernetes_go_mod() -> str:
    """The real go.mod of k8s.io/kubernetes at the pinned version, from the Go module cache."""
    cache = _go_mod_cache()
    if cache is None:
        pytest.skip("go is not installed")
    path = cache / "cache" / "download" / "k8s.io" / "kubernetes" / "@v" / f"{build.KUBERNETES_VERSION}.mod"
    if not path.is_file():
        pytest.skip(f"{path} is not in the module cache (run `mcp-devcluster build` once)")
    return path.read_text()


def _blocks(go_mod: str, directive: str) -> list[list[str]]:
    """Token lists of every line in ``directive ( ... )`` blocks and single-line directives."""
    lines: list[list[str]] = []
    inside = False
    for raw in go_mod.splitlines():
        line = raw.split("//", 1)[0].strip()
        if inside:
            if line == ")":
                inside = False
            elif line:
                lines.append(line.split())
        elif line == f"{directive} (":
            inside = True
        elif line.startswith(f"{directive} "):
            lines.append(line.split()[1:])
    return lines


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MCP_OPERATOR_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_staging_modules_are_every_local_replacement(kubernetes_go_mod: str) -> None:
    staging = build.kubernetes_staging_modules(kubernetes_go_mod)
    required_placeholder = {t[0] for t in _blocks(kubernetes_go_mod, "require") if t[1] == "v0.0.0"}
    local = {t[0] for t in _blocks(kubernetes_go_mod, "replace") if t[2].startswith("./staging/")}
    assert staging == sorted(staging) and len(set(staging)) == len(staging)
    # every module kubernetes requires at the placeholder is a staging module, and is found
    assert required_placeholder <= local
    assert set(staging) == required_placeholder
    assert {"k8s.io/api", "k8s.io/apimachinery", "k8s.io/client-go", "k8s.io/component-base"} <= set(staging)


def test_wrapper_go_mod_replaces_every_staging_module(kubernetes_go_mod: str, cache: Path) -> None:
    cache.mkdir(parents=True)
    component = build.components()["kubernetes"]
    # the real resolution: `go mod download` of the pinned version (served from the module cache)
    replaces = build._resolve_replaces(component)
    text = build.wrapper_go_mod(component, replaces)
    staging = build.kubernetes_staging_modules(kubernetes_go_mod)
    replaced = {t[0]: t[2:] for t in _blocks(text, "replace")}
    assert set(replaced) == set(staging)
    minor = build.KUBERNETES_VERSION.split(".", 1)[1]
    for module, target in replaced.items():
        assert target == [module, f"v0.{minor}"], module
    assert "v0.0.0" not in text
    assert _blocks(text, "require") == [["k8s.io/kubernetes", build.KUBERNETES_VERSION]]
    assert text.startswith("module mcp-operator.local/build/kubernetes\n")
    assert "\ngo 1." in text


def test_etcd_wrapper_pins_its_siblings() -> None:
    etcd = build.components()["etcd"]
    text = build.wrapper_go_mod(etcd, dict(etcd.sibling_replaces))
    replaced = {t[0]: t[2:] for t in _blocks(text, "replace")}
    assert "go.etcd.io/etcd/api/v3" in replaced and "go.etcd.io/etcd/client/v3" in replaced
    assert all(v == [m, build.ETCD_VERSION] for m, v in replaced.items())
    assert _blocks(text, "require") == [["go.etcd.io/etcd/server/v3", build.ETCD_VERSION]]


def test_wrapper_without_replaces_has_no_replace_block() -> None:
    text = build.wrapper_go_mod(build.components()["kwok"], {})
    assert "replace" not in text
    assert _blocks(text, "require") == [["sigs.k8s.io/kwok", build.KWOK_VERSION]]


def test_kubernetes_version_is_set_through_ldflags() -> None:
    flags = build.components()["kubernetes"].ldflags
    major, minor = build.KUBERNETES_VERSION.lstrip("v").split(".")[:2]
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        assert f"-X {pkg}.gitVersion={build.KUBERNETES_VERSION}" in flags
        assert f"-X {pkg}.gitMajor={major}" in flags and f"-X {pkg}.gitMinor={minor}" in flags
        assert f"-X {pkg}.gitTreeState=clean" in flags
    assert all(flag.startswith("-X ") and "=" in flag for flag in flags)


def test_cache_root_override_and_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MCP_OPERATOR_CACHE", str(tmp_path / "elsewhere"))
    assert build.cache_root() == tmp_path / "elsewhere"
    comp = build.components()["etcd"]
    assert comp.bin_dir == tmp_path / "elsewhere" / "bin" / f"etcd-{build.ETCD_VERSION}"
    assert comp.work_dir == tmp_path / "elsewhere" / "build" / f"etcd-{build.ETCD_VERSION}"
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("MCP_OPERATOR_CACHE", "~/c")
    assert build.cache_root() == tmp_path / "home" / "c"
    monkeypatch.delenv("MCP_OPERATOR_CACHE")
    assert build.cache_root() == tmp_path / "home" / ".cache" / "mcp-operator"


def test_a_stamped_build_is_reused_without_building(cache: Path) -> None:
    comp = build.components()["kwok"]
    assert not comp.is_built()
    comp.bin_dir.mkdir(parents=True)
    (comp.bin_dir / build.STAMP).write_text(json.dumps({"version": comp.version, "seconds": 1.0}))
    assert comp.is_built()
    assert build.build(comp) == comp.bin_dir
    assert build.binary("kwok", "kwok") == comp.bin_dir / "kwok"
    assert not comp.work_dir.exists()  # nothing was started


def test_versions_key_the_cache() -> None:
    table = build.components()
    assert {"kubernetes", "etcd", "kwok", "helm"} <= set(table)
    for name, comp in table.items():
        assert comp.name == name and comp.bin_dir.name == f"{name}-{comp.cache_key}"
        assert comp.cache_key.startswith(comp.version)
        assert comp.work_dir.name == comp.bin_dir.name
    assert table["kubernetes"].version == build.KUBERNETES_VERSION
    assert table["etcd"].version == build.ETCD_VERSION
    assert build.KUBERNETES_VERSION.startswith("v1.36.") and build.ETCD_VERSION.startswith("v3.6.")


def test_coredns_links_the_plugins_its_corefile_uses_and_no_other() -> None:
    """The real node's CoreDNS is our own main package: every directive of the Corefile the
    harness writes has its plugin imported (or CoreDNS would refuse the Corefile at start), and
    nothing else of CoreDNS's plugins is (the stock command links them all, cloud SDKs included)."""
    corefile = dns.corefile(address="10.0.0.2", kubeconfig=Path("/k"), ready_port=1)
    directives = set(re.findall(r"^    ([a-z0-9_]+)", corefile, re.MULTILINE))  # the server block's own
    source = (build.COREDNS_SOURCE / "main.go").read_text()
    imported = set(re.findall(r'"github\.com/coredns/coredns/plugin/([a-z0-9_]+)"', source))
    assert directives == imported == {"bind", "errors", "ready", "kubernetes", "cache"}
    assert '"github.com/coredns/coredns/core/plugin"' not in source  # the stock list of every plugin
    component = build.components()["coredns"]
    assert component.source_dir == build.COREDNS_SOURCE
    assert "github.com/coredns/coredns v1.15.0" in (build.COREDNS_SOURCE / "go.mod").read_text()


def test_argocd_is_built_with_the_two_roles_the_local_argo_cd_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The local Argo CD runs the repo server and the application controller, each under its
    name (``argocd._argv``): our main package links those two roles and no other (upstream's
    links every role and the CLI), and an edit of it changes the cache key, so it is rebuilt."""
    component = build.components()["argocd"]
    assert component.main_package == build.ARGOCD_MAIN
    assert component.packages == (f"./{build.MAIN_IN_TREE}",)
    source = (build.ARGOCD_MAIN / "main.go").read_text()
    roles = set(re.findall(r'"github\.com/argoproj/argo-cd/v3/cmd/([a-z-]+)/commands"', source))
    assert roles == {"argocd-application-controller", "argocd-repo-server"}
    monkeypatch.setattr(argocd, "_binary", lambda name: name)  # the name each is called by, unbuilt
    argv = argocd._argv(Path("/r"), Path("/k"), argocd.Ports(*range(1, 6)), "argocd")
    run = {cmd[0] for name, cmd in argv.items() if name in ("repo-server", "application-controller")}
    assert run == roles == set(component.aliases)
    assert component.cache_key.startswith(f"{build.ARGOCD_VERSION}-src-")
    assert component.bin_dir.name == f"argocd-{component.cache_key}"
