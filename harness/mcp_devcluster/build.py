"""Build the control-plane binaries from the Go module proxy into a versioned cache.

k8s.io/kubernetes and etcd's server module cannot be `go install`ed: their go.mod files
replace sibling modules with relative paths. A small wrapper module of ours requires the
upstream module and replaces each of those siblings with its published version. Each
component gets its own wrapper so one does not raise the others' dependencies.

Binaries land in ``<cache>/bin/<component>-<version>/``; a finished build leaves a stamp
file there, so later runs (fresh clones, CI on the same machine) only check the stamp.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

KUBERNETES_VERSION = "v1.36.3"
ETCD_VERSION = "v3.6.16"
KWOK_VERSION = "v0.8.0"
HELM_VERSION = "v3.22.0"
# no tagged releases on the proxy: a pinned commit of the main module, and of its nested api module
CHAOS_MESH_VERSION = "v0.9.1-0.20260902003049-47411975a8cb"
CHAOS_MESH_API_VERSION = "v0.0.0-20260906172039-d70b66ad97ac"
# v3.2.11 builds in its own module tree; v3.3.x replaces gitops-engine with a nested directory
# the module zip leaves out, and v3.2.12's tree does not compile
ARGOCD_VERSION = "v3.2.11"
ARGOCD_VERSION_PACKAGE = "github.com/argoproj/argo-cd/v3/common"
ACTIONLINT_VERSION = "v1.7.12"

STAMP = ".built"
MAIN_IN_TREE = "cmd/mcp-main"  # where a component's own main package goes in the module's tree
LUAHEALTH_SOURCE = Path(__file__).parent / "data" / "luahealth"
COREDNS_SOURCE = Path(__file__).parent / "data" / "coredns"
XDSBED_SOURCE = Path(__file__).parent / "data" / "xdsbed"
ARGOCD_MAIN = Path(__file__).parent / "data" / "argocd"


def cache_root() -> Path:
    """Where builds and binaries live; ``MCP_OPERATOR_CACHE`` overrides the default."""
    override = os.environ.get("MCP_OPERATOR_CACHE")
    if override:
        return Path(override).expanduser()
    return Path.home() / ".cache" / "mcp-operator"


@dataclass(frozen=True)
class Component:
    """One wrapper module and the commands built from it."""

    name: str
    module: str
    version: str
    packages: tuple[str, ...]
    ldflags: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    # sibling modules whose relative replace lines must point at published versions
    sibling_replaces: dict[str, str] = field(default_factory=dict)
    # a Go module of ours (go.mod, go.sum, sources) instead of a wrapper around a published one
    source_dir: Path | None = None
    # replace directives only apply in the main module: copy the upstream module's version pins
    inherit_replaces: bool = False
    # some commands link C code (e.g. through a cgo-only dependency)
    cgo: bool = False
    # build inside a copy of the published module's own tree (its go.mod, go.sum and local
    # replaces), for a module whose commands cannot be built from a wrapper
    in_module_tree: bool = False
    # a main package of ours (a directory), copied into that tree as MAIN_IN_TREE and built
    # instead of upstream's commands: the roles we run, not every one upstream links
    main_package: Path | None = None
    # the built command's name where `go build` would name it after its directory (``cmd``)
    command_name: str | None = None
    # more names for it (links): a multi-call binary picks its role by the name it is called by
    aliases: tuple[str, ...] = ()

    @property
    def cache_key(self) -> str:
        """The version, and the content of our main package where there is one: editing it rebuilds."""
        if self.main_package is None:
            return self.version
        return f"{self.version}-{_source_version(self.main_package)}"

    @property
    def bin_dir(self) -> Path:
        return cache_root() / "bin" / f"{self.name}-{self.cache_key}"

    @property
    def work_dir(self) -> Path:
        return cache_root() / "build" / f"{self.name}-{self.cache_key}"

    def binary(self, command: str) -> Path:
        return self.bin_dir / command

    def is_built(self) -> bool:
        return (self.bin_dir / STAMP).is_file()


def _go_env(*, cgo: bool = False) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"CGO_ENABLED": "1" if cgo else "0", "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod"})
    return env


def _run(cmd: list[str], cwd: Path, log: Path, *, cgo: bool = False) -> None:
    with log.open("a") as sink:
        sink.write(f"$ {' '.join(cmd)}\n")
        sink.flush()
        result = subprocess.run(cmd, cwd=cwd, env=_go_env(cgo=cgo), stdout=sink, stderr=subprocess.STDOUT)
    if result.returncode != 0:
        tail = log.read_text()[-4000:]
        raise RuntimeError(f"{' '.join(cmd[:3])} failed (exit {result.returncode}); log {log}:\n{tail}")


def _download(module: str, version: str) -> dict[str, str]:
    """Download one module version through the module proxy; return `go mod download -json`."""
    cache_root().mkdir(parents=True, exist_ok=True)
    out = subprocess.run(
        ["go", "mod", "download", "-json", f"{module}@{version}"],
        env=_go_env(),
        capture_output=True,
        text=True,
        check=False,
        cwd=cache_root(),
    )
    if out.returncode != 0:
        raise RuntimeError(f"go mod download {module}@{version} failed: {out.stdout}{out.stderr}")
    info: dict[str, str] = json.loads(out.stdout)
    return info


def _module_go_mod(module: str, version: str) -> str:
    """One module version's go.mod text."""
    return Path(_download(module, version)["GoMod"]).read_text()


def module_dir(module: str, version: str) -> Path:
    """One module version's extracted (read-only) tree."""
    return Path(_download(module, version)["Dir"])


STAGING_REQUIRE = re.compile(r"^\s*(k8s\.io/[\w./-]+)\s+v0\.0\.0\s*$", re.MULTILINE)


def kubernetes_staging_modules(go_mod_text: str) -> list[str]:
    """Every staging module k8s.io/kubernetes requires at the placeholder version v0.0.0."""
    return sorted(set(STAGING_REQUIRE.findall(go_mod_text)))


REPLACE_LINE = re.compile(r"^\s*(?:replace\s+)?(\S+)(?:\s+\S+)?\s+=>\s+(\S+)(?:\s+(\S+))?\s*$")


def module_replaces(go_mod_text: str) -> dict[str, str]:
    """A go.mod's replace directives that name a published version, as wrapper replaces.

    Local (directory) targets are left out: they are absent from the module's zip. The value is
    the version alone where the target is the same module, else "target version".
    """
    replaces = {}
    for line in go_mod_text.splitlines():
        match = REPLACE_LINE.match(line.split("//", 1)[0])
        if match is None or match.group(3) is None:
            continue
        module, target, version = match.groups()
        replaces[module] = version if target == module else f"{target} {version}"
    return replaces


def _replace_line(module: str, target: str) -> str:
    return f"\t{module} => {target if ' ' in target else f'{module} {target}'}"


def wrapper_go_mod(component: Component, replaces: dict[str, str]) -> str:
    lines = [
        f"module mcp-operator.local/build/{component.name}",
        "",
        "go 1.26.0",
        "",
        f"require {component.module} {component.version}",
        "",
    ]
    if replaces:
        lines.append("replace (")
        lines.extend(_replace_line(mod, target) for mod, target in sorted(replaces.items()))
        lines.append(")")
    return "\n".join(lines) + "\n"


def _source_version(directory: Path) -> str:
    """Our own Go sources are keyed by their content, so an edit rebuilds them."""
    digest = hashlib.sha256()
    for item in sorted(directory.iterdir()):
        digest.update(item.name.encode() + b"\0" + item.read_bytes())
    return "src-" + digest.hexdigest()[:12]


def _own_module(name: str, source: Path) -> Component:
    """A Go module of ours under ``data/``, keyed by its sources' content."""
    return Component(
        name=name,
        module=f"mcp-operator.local/{name}",
        version=_source_version(source),
        packages=(".",),
        source_dir=source,
    )


def _version_ldflags(version: str) -> tuple[str, ...]:
    major, minor = version.lstrip("v").split(".")[:2]
    flags = []
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [
            f"-X {pkg}.gitVersion={version}",
            f"-X {pkg}.gitMajor={major}",
            f"-X {pkg}.gitMinor={minor}",
            f"-X {pkg}.gitTreeState=clean",
            f"-X {pkg}.buildDate=1970-01-01T00:00:00Z",
        ]
    return tuple(flags)


def components() -> dict[str, Component]:
    staging_version = "v0." + KUBERNETES_VERSION.lstrip("v").split(".", 1)[1]
    return {
        "kubernetes": Component(
            name="kubernetes",
            module="k8s.io/kubernetes",
            version=KUBERNETES_VERSION,
            packages=(
                "k8s.io/kubernetes/cmd/kube-apiserver",
                "k8s.io/kubernetes/cmd/kube-controller-manager",
                "k8s.io/kubernetes/cmd/kube-scheduler",
                "k8s.io/kubernetes/cmd/kubectl",
            ),
            ldflags=_version_ldflags(KUBERNETES_VERSION),
            tags=("selinux", "notest"),
            sibling_replaces={"@staging": staging_version},
        ),
        # the real node's agents: apart from the control plane, so `make demo` never builds them
        "kubernetes-node": Component(
            name="kubernetes-node",
            module="k8s.io/kubernetes",
            version=KUBERNETES_VERSION,
            packages=("k8s.io/kubernetes/cmd/kubelet", "k8s.io/kubernetes/cmd/kube-proxy"),
            ldflags=_version_ldflags(KUBERNETES_VERSION),
            tags=("selinux", "notest"),
            sibling_replaces={"@staging": staging_version},
        ),
        "etcd": Component(
            name="etcd",
            module="go.etcd.io/etcd/server/v3",
            version=ETCD_VERSION,
            packages=("go.etcd.io/etcd/server/v3",),
            sibling_replaces={
                "go.etcd.io/etcd/api/v3": ETCD_VERSION,
                "go.etcd.io/etcd/client/pkg/v3": ETCD_VERSION,
                "go.etcd.io/etcd/client/v3": ETCD_VERSION,
                "go.etcd.io/etcd/pkg/v3": ETCD_VERSION,
            },
        ),
        "kwok": Component(
            name="kwok",
            module="sigs.k8s.io/kwok",
            version=KWOK_VERSION,
            packages=("sigs.k8s.io/kwok/cmd/kwok",),
        ),
        "helm": Component(
            name="helm",
            module="helm.sh/helm/v3",
            version=HELM_VERSION,
            packages=("helm.sh/helm/v3/cmd/helm",),
        ),
        # the real node's cluster DNS: answers Service names with their ClusterIPs. CoreDNS
        # v1.15.0 (data/coredns/go.mod) with only the plugins its Corefile uses
        "coredns": _own_module("coredns", COREDNS_SOURCE),
        # the chaos-daemon links github.com/chaos-mesh/chaos-driver, which needs cgo
        "chaos-mesh": Component(
            name="chaos-mesh",
            module="github.com/chaos-mesh/chaos-mesh",
            version=CHAOS_MESH_VERSION,
            packages=(
                "github.com/chaos-mesh/chaos-mesh/cmd/chaos-controller-manager",
                "github.com/chaos-mesh/chaos-mesh/cmd/chaos-daemon",
            ),
            ldflags=(f"-X github.com/chaos-mesh/chaos-mesh/pkg/version.gitVersion={CHAOS_MESH_VERSION}",),
            sibling_replaces={"github.com/chaos-mesh/chaos-mesh/api": CHAOS_MESH_API_VERSION},
            inherit_replaces=True,
            cgo=True,
        ),
        # Argo CD as a multi-call binary of the two roles the local Argo CD runs:
        # argocd-application-controller and argocd-repo-server are the same file under the name
        # they are called by (data/argocd/main.go; upstream's cmd links every role and the CLI)
        "argocd": Component(
            name="argocd",
            module="github.com/argoproj/argo-cd/v3",
            version=ARGOCD_VERSION,
            packages=(f"./{MAIN_IN_TREE}",),
            ldflags=(
                f"-X {ARGOCD_VERSION_PACKAGE}.version={ARGOCD_VERSION.lstrip('v')}",
                f"-X {ARGOCD_VERSION_PACKAGE}.gitTag={ARGOCD_VERSION}",
                f"-X {ARGOCD_VERSION_PACKAGE}.gitCommit={ARGOCD_VERSION}",
                f"-X {ARGOCD_VERSION_PACKAGE}.gitTreeState=clean",
            ),
            in_module_tree=True,
            main_package=ARGOCD_MAIN,
            command_name="argocd",
            aliases=("argocd-application-controller", "argocd-repo-server"),
        ),
        # checks .github/workflows (make lint)
        "actionlint": Component(
            name="actionlint",
            module="github.com/rhysd/actionlint",
            version=ACTIONLINT_VERSION,
            packages=("github.com/rhysd/actionlint/cmd/actionlint",),
            ldflags=(f"-X github.com/rhysd/actionlint.version={ACTIONLINT_VERSION}",),
        ),
        "luahealth": _own_module("luahealth", LUAHEALTH_SOURCE),
        "xdsbed": _own_module("xdsbed", XDSBED_SOURCE),
    }


def _resolve_replaces(component: Component) -> dict[str, str]:
    replaces = dict(component.sibling_replaces)
    staging = replaces.pop("@staging", None)
    if not staging and not component.inherit_replaces:
        return replaces
    go_mod = _module_go_mod(component.module, component.version)
    if staging:
        replaces.update(dict.fromkeys(kubernetes_staging_modules(go_mod), staging))
    if component.inherit_replaces:
        replaces = {**module_replaces(go_mod), **replaces}  # ours win: they replace the local ones
    return replaces


def _copy_module_tree(component: Component, work: Path) -> Path:
    """A writable copy of the module's tree, where `go build` uses its own go.mod as the main module."""
    tree = work / "src"
    shutil.rmtree(tree, ignore_errors=True)
    shutil.copytree(module_dir(component.module, component.version), tree)
    for path in [tree, *tree.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)
    if component.main_package is not None:
        shutil.copytree(component.main_package, tree / MAIN_IN_TREE)
    return tree


def _name_command(bin_dir: Path, component: Component) -> None:
    """Give the one built command its name, and link its other names to it."""
    if component.command_name is None:
        return
    built = [p for p in bin_dir.iterdir() if p.is_file()]
    if len(built) != 1:
        raise RuntimeError(f"{component.name}: expected one command in {bin_dir}, found {built}")
    built[0].rename(bin_dir / component.command_name)
    for alias in component.aliases:
        (bin_dir / alias).symlink_to(component.command_name)


def build(component: Component, *, force: bool = False, log_stream: bool = True) -> Path:
    """Build one component unless its stamp says it is already there; return its bin dir."""
    if component.is_built() and not force:
        return component.bin_dir
    cache_root().mkdir(parents=True, exist_ok=True)
    work = component.work_dir
    work.mkdir(parents=True, exist_ok=True)
    log = work / "build.log"
    log.write_text("")
    started = time.monotonic()
    if log_stream:
        print(f"building {component.name} {component.version} (log: {log})", file=sys.stderr)
    build_dir = work
    if component.source_dir is not None:
        for item in component.source_dir.iterdir():
            shutil.copy2(item, work / item.name)
    elif component.in_module_tree:
        build_dir = _copy_module_tree(component, work)
    else:
        (work / "go.mod").write_text(wrapper_go_mod(component, _resolve_replaces(component)))
        (work / "go.sum").touch()
    staging_bin = work / "out"
    shutil.rmtree(staging_bin, ignore_errors=True)
    staging_bin.mkdir()
    cmd = ["go", "build", "-trimpath", "-o", str(staging_bin) + "/"]
    if component.tags:
        cmd += ["-tags", ",".join(component.tags)]
    ldflags = ["-s", "-w", *component.ldflags]
    cmd += ["-ldflags", " ".join(ldflags), *component.packages]
    if component.source_dir is None and not component.in_module_tree:
        # -mod=mod lets go fill go.sum; `go get` of the commands completes the build list first
        _run(["go", "get", *[f"{p}@{component.version}" for p in component.packages]], work, log)
    _run(cmd, build_dir, log, cgo=component.cgo)
    _name_command(staging_bin, component)
    bin_dir = component.bin_dir
    shutil.rmtree(bin_dir, ignore_errors=True)
    bin_dir.parent.mkdir(parents=True, exist_ok=True)
    staging_bin.rename(bin_dir)
    if component.name == "etcd":
        # `go build` names a .../server/v3 main package "server"
        next(p for p in bin_dir.iterdir() if p.name in ("server", "v3")).rename(bin_dir / "etcd")
    elapsed = time.monotonic() - started
    (bin_dir / STAMP).write_text(json.dumps({"version": component.version, "seconds": round(elapsed, 1)}))
    if log_stream:
        print(f"built {component.name} {component.version} in {elapsed:.0f}s", file=sys.stderr)
    return bin_dir


def ensure_all(names: list[str] | None = None, *, force: bool = False) -> dict[str, Path]:
    table = components()
    wanted = names or list(table)
    return {name: build(table[name], force=force) for name in wanted}


def binary(component: str, command: str) -> Path:
    """Path of one built command, building its component first when needed."""
    comp = components()[component]
    build(comp)
    return comp.binary(command)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build control-plane binaries into the cache.")
    parser.add_argument("components", nargs="*", help="kubernetes, etcd, kwok, helm (default: all)")
    parser.add_argument("--force", action="store_true", help="rebuild even when the stamp exists")
    args = parser.parse_args(argv)
    for name, path in ensure_all(args.components or None, force=args.force).items():
        print(f"{name}: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
