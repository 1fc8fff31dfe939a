"""Argo CD for the local control plane: its own application controller and repo server (the
``argocd`` build component, Argo CD's multi-call binary from the Go module proxy), Redis (the
Debian package) for their cache, and a Git server on loopback (``git daemon``) that tests push
releases to. Argo CD's CustomResourceDefinitions come from the module's ``manifests/crds``.

How it differs from an installation by Argo CD's own manifests, and why:

* The components are processes, not pods (there are no images here). The controller reads the
  cluster through the admin kubeconfig; it deploys to the cluster through a cluster Secret for
  the API server's own URL, since outside a pod ``https://kubernetes.default.svc`` (Argo CD's
  "in-cluster") does not resolve.
* No argocd-server: nothing here needs its UI or API. The resource tree it would show (each
  resource's health) is read where it keeps it, in Redis (:func:`resource_tree`).
* The settings are Argo CD's own (``manifests/base/config`` of the module, defaults and all:
  resource health is not written into the Application, status-only updates are ignored); the
  health checks of our kinds are added to argocd-cm exactly as the docs tell users.
* Git answers on ``git://127.0.0.1:PORT/NAME``, pushes included (``--enable=receive-pack``).
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import shutil
import socket
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from . import build, stack
from .processes import ManagedProcess, StartupError, accepts, free_port, http_ok, stop_pid, wait_until

NAMESPACE = "argocd"
CLUSTER_NAME = "local"
CRD_FILES = ("application-crd.yaml", "appproject-crd.yaml")
HEALTH_KUSTOMIZATION = Path(__file__).resolve().parents[2] / "manifests" / "argocd"
PART_OF = {"app.kubernetes.io/part-of": "argocd"}
CACHE_VERSION = "1.8.3"  # Argo CD's common.CacheVersion: in its Redis keys (then .gz: gzip is its default)
GIT_USER = ["-c", "user.name=mcp-devcluster", "-c", "user.email=mcp-devcluster@localhost"]


@dataclass(frozen=True)
class Ports:
    redis: int
    repo_server: int
    repo_server_metrics: int
    controller_metrics: int
    git: int

    @classmethod
    def free(cls) -> Ports:
        return cls(free_port(), free_port(), free_port(), free_port(), free_port())


@dataclass
class ArgoCD:
    """A running Argo CD: what :func:`stop_argocd` takes down, and where its Git server is."""

    kubeconfig: Path
    server: str  # the API server's URL, the destination of Applications
    root: Path
    ports: Ports
    namespace: str = NAMESPACE  # where its settings and Applications live
    processes: list[ManagedProcess] = field(default_factory=list)

    @property
    def git_root(self) -> Path:
        return self.root / "git"

    def repo_url(self, name: str) -> str:
        return f"git://127.0.0.1:{self.ports.git}/{name}"

    def pids(self) -> dict[str, int]:
        return {f"argocd-{p.name}": p.popen.pid for p in self.processes if p.popen is not None}

    def log_tails(self) -> str:
        return "\n".join(f"--- {p.name} ---\n{p.log_tail()}" for p in self.processes)


def module_tree() -> Path:
    """Argo CD's module as the proxy serves it (downloaded on first use, then cached)."""
    return build.module_dir(build.components()["argocd"].module, build.ARGOCD_VERSION)


def crd_paths() -> list[Path]:
    return [module_tree() / "manifests" / "crds" / name for name in CRD_FILES]


def install_crds(kubeconfig: Path) -> None:
    """Argo CD's own Application and AppProject CRDs (server-side: they are large)."""
    files = [arg for path in crd_paths() for arg in ("-f", str(path))]
    stack.kubectl(kubeconfig, "apply", "--server-side", "--force-conflicts", *files, timeout=300)
    names = ("crd/applications.argoproj.io", "crd/appprojects.argoproj.io")
    # `kubectl wait` fails at once on a CRD whose status has no conditions yet: poll it
    stack.until(
        lambda: (
            stack.kubectl(kubeconfig, "wait", "--for=condition=Established", *names, check=False).returncode
            == 0
        ),
        "Argo CD's CRDs to be established",
        timeout_s=120,
    )


def cluster_secret(kubeconfig: Path, server: str, namespace: str = NAMESPACE) -> dict[str, Any]:
    """The cluster Secret through which the controller deploys to ``server``, with the admin
    kubeconfig's certificate authority and client certificate."""
    config = yaml.safe_load(kubeconfig.read_text())
    cluster = config["clusters"][0]["cluster"]
    user = config["users"][0]["user"]

    def data(inline: str, path: str, entry: dict[str, str]) -> str:
        if inline in entry:
            return str(entry[inline])
        return base64.b64encode(Path(entry[path]).read_bytes()).decode()

    tls = {
        "caData": data("certificate-authority-data", "certificate-authority", cluster),
        "certData": data("client-certificate-data", "client-certificate", user),
        "keyData": data("client-key-data", "client-key", user),
    }
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": f"cluster-{CLUSTER_NAME}",
            "namespace": namespace,
            "labels": {"argocd.argoproj.io/secret-type": "cluster", **PART_OF},
        },
        "type": "Opaque",
        "stringData": {
            "name": CLUSTER_NAME,
            "server": server,
            "config": json.dumps({"tlsClientConfig": tls}),
        },
    }


def config_dir() -> Path:
    """Argo CD's own settings as its installation applies them (argocd-cm with its defaults,
    argocd-cmd-params-cm, argocd-rbac-cm, argocd-secret, ...): ``manifests/base/config``."""
    return module_tree() / "manifests" / "base" / "config"


def default_project(namespace: str = NAMESPACE) -> dict[str, Any]:
    """The AppProject ``default``, which argocd-server creates on its first start."""
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "AppProject",
        "metadata": {"name": "default", "namespace": namespace},
        "spec": {
            "sourceRepos": ["*"],
            "destinations": [{"server": "*", "namespace": "*"}],
            "clusterResourceWhitelist": [{"group": "*", "kind": "*"}],
        },
    }


def install_settings(
    kubeconfig: Path, server: str, namespace: str = NAMESPACE, health_checks: bool = True
) -> None:
    """Argo CD's settings as its install applies them, the cluster Secret and the default
    project; then the health checks of our kinds, the way the docs tell users to add them."""
    stack.kubectl(kubeconfig, "create", "namespace", namespace, check=False)
    stack.kubectl(kubeconfig, "apply", "-n", namespace, "-k", str(config_dir()))
    body = yaml.safe_dump_all([cluster_secret(kubeconfig, server, namespace), default_project(namespace)])
    stack.kubectl(kubeconfig, "apply", "-f", "-", input_text=body)
    if health_checks:
        add_health_checks(kubeconfig, namespace)


def add_health_checks(kubeconfig: Path, namespace: str = NAMESPACE) -> None:
    """What docs/release-gating.md tells users to run against their Argo CD: ``kubectl kustomize
    manifests/argocd | kubectl -n argocd patch configmap argocd-cm --type merge --patch-file
    /dev/stdin``. A merge patch adds the two keys and leaves the rest; ``kubectl apply -k``,
    client- or server-side, would take over argocd-cm and drop the keys Argo CD's install put there."""
    rendered = stack.kubectl(kubeconfig, "kustomize", str(HEALTH_KUSTOMIZATION)).stdout
    stack.kubectl(
        kubeconfig, "-n", namespace, "patch", "configmap", "argocd-cm",
        "--type", "merge", "--patch-file", "/dev/stdin", input_text=rendered,
    )  # fmt: skip


def _binary(name: str) -> str:
    return str(build.binary("argocd", name))


def _redis_server() -> str:
    found = shutil.which("redis-server")
    if found is None:
        raise StartupError(
            "redis-server is not installed (the Debian package redis-server: make system-packages)"
        )
    return found


def _process_env(root: Path) -> dict[str, str]:
    """helm first on PATH (the repo server renders Helm sources with it); no GPG; no user config."""
    helm_dir = str(build.binary("helm", "helm").parent)
    env = {**os.environ, "PATH": f"{helm_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("KUBECONFIG", None)
    env.update({"ARGOCD_GPG_ENABLED": "false", "HOME": str(root / "home"), "TMPDIR": str(root / "tmp")})
    (root / "home").mkdir(parents=True, exist_ok=True)
    (root / "tmp").mkdir(parents=True, exist_ok=True)
    return env


def _argv(root: Path, kubeconfig: Path, ports: Ports, namespace: str) -> dict[str, list[str]]:
    redis = f"127.0.0.1:{ports.redis}"
    return {
        "redis": [
            _redis_server(),
            "--port", str(ports.redis), "--bind", "127.0.0.1",
            "--save", "", "--appendonly", "no", "--dir", str(root),
        ],
        "git-daemon": [
            "git", "daemon", "--reuseaddr", "--export-all", "--enable=receive-pack", "--informative-errors",
            "--listen=127.0.0.1", f"--port={ports.git}", f"--base-path={root / 'git'}", str(root / "git"),
        ],
        "repo-server": [
            _binary("argocd-repo-server"),
            "--address", "127.0.0.1", "--port", str(ports.repo_server),
            "--metrics-address", "127.0.0.1", "--metrics-port", str(ports.repo_server_metrics),
            "--disable-tls", "--redis", redis,
        ],
        "application-controller": [
            _binary("argocd-application-controller"),
            "--kubeconfig", str(kubeconfig), "--namespace", namespace,
            "--repo-server", f"127.0.0.1:{ports.repo_server}", "--repo-server-plaintext",
            "--redis", redis, "--metrics-port", str(ports.controller_metrics),
            "--status-processors", "2", "--operation-processors", "2",
        ],
    }  # fmt: skip


def _ready_checks(ports: Ports) -> dict[str, Any]:
    return {
        "redis": lambda: accepts(ports.redis),
        "git-daemon": lambda: accepts(ports.git),
        "repo-server": lambda: http_ok(f"http://127.0.0.1:{ports.repo_server_metrics}/metrics"),
        "application-controller": lambda: http_ok(f"http://127.0.0.1:{ports.controller_metrics}/metrics"),
    }


def start_argocd(
    state_dir: Path,
    kubeconfig: Path,
    server: str,
    *,
    namespace: str = NAMESPACE,
    health_checks: bool = True,
    timeout_s: float = 180,
) -> ArgoCD:
    """CRDs, namespace and settings, the docs' health checks (unless ``health_checks`` is off:
    an Argo CD whose user skipped that step), then Redis, Git, the repo server and the
    application controller of ``namespace``; returns once each serves. On a failure what was
    started is stopped again."""
    build.ensure_all(["argocd", "helm"])
    root = state_dir / namespace
    (root / "git").mkdir(parents=True, exist_ok=True)
    install_crds(kubeconfig)
    install_settings(kubeconfig, server, namespace, health_checks)
    ports = Ports.free()
    argo = ArgoCD(kubeconfig, server, root, ports, namespace)
    env = _process_env(root)
    ready = _ready_checks(ports)
    try:
        for name, argv in _argv(root, kubeconfig, ports, namespace).items():
            proc = ManagedProcess(name, argv, root / f"{name}.log", env=env)
            argo.processes.append(proc)
            proc.start()
            wait_until(proc, ready[name], timeout_s=timeout_s, what="serving")
    except (StartupError, RuntimeError, OSError, subprocess.SubprocessError):
        stop_argocd(argo)
        raise
    return argo


def stop_argocd(argo: ArgoCD) -> None:
    """The controller first (nothing syncs after), then the repo server, Git and Redis."""
    for proc in reversed(argo.processes):
        if proc.popen is not None:
            stop_pid(proc.popen.pid)


def create_repository(argo: ArgoCD, name: str) -> Path:
    """A bare repository that ``git daemon`` serves as ``repo_url(name)``."""
    path = argo.git_root / name
    subprocess.run(["git", "init", "--quiet", "--bare", "--initial-branch=main", str(path)], check=True)
    return path


def push(argo: ArgoCD, name: str, files: dict[str, str], message: str, work: Path) -> str:
    """Commit ``files`` (path → text; the tree becomes exactly these) to ``main`` and push it
    through the Git server, as a developer would; returns the commit's SHA."""
    if not (work / ".git").is_dir():
        # (an empty repository the first time: git says so on stderr)
        subprocess.run(
            ["git", "clone", "--quiet", argo.repo_url(name), str(work)], check=True, capture_output=True
        )
    for old in work.iterdir():
        if old.name != ".git":
            shutil.rmtree(old) if old.is_dir() else old.unlink()
    for relative, text in files.items():
        target = work / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)

    def git(*args: str) -> str:
        done = subprocess.run(["git", *GIT_USER, *args], cwd=work, check=True, capture_output=True, text=True)
        return done.stdout.strip()

    git("add", "--all")
    git("commit", "--quiet", "--allow-empty", "-m", message)
    git("push", "--quiet", "origin", "HEAD:main")
    return git("rev-parse", "HEAD")


def _redis_get(port: int, key: str) -> bytes | None:
    """One GET over Redis's own protocol (RESP): the value's bytes, or None when there is none."""
    raw = key.encode()
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n" % (len(raw), raw))
        reply = sock.makefile("rb")
        header = reply.readline()
        if header.startswith(b"$-1"):
            return None
        if not header.startswith(b"$"):
            raise RuntimeError(f"Redis answered GET {key!r} with {header!r}")
        return reply.read(int(header[1:]))


def resource_tree(argo: ArgoCD, app: str) -> dict[str, Any] | None:
    """The resource tree of an Application as Argo CD keeps it for its UI and CLI: each node's
    kind, name and health. Argo CD 3 no longer writes resource health into the Application."""
    value = _redis_get(argo.ports.redis, f"app|resources-tree|{app}|{CACHE_VERSION}.gz")
    if value is None:
        return None
    tree: dict[str, Any] = json.loads(gzip.decompress(value))
    return tree


def tree_health(tree: dict[str, Any] | None) -> dict[str, str]:
    """``Kind/name`` → health status of every node of a resource tree that has one."""
    nodes = (tree or {}).get("nodes") or []
    return {
        f"{n['kind']}/{n['name']}": n["health"]["status"]
        for n in nodes
        if (n.get("health") or {}).get("status")
    }
