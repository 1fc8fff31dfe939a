"""``mcp-devcluster``: the test harness's command. ``build|up|down|env|status`` manage the local
control plane by hand (``up --real-node``: one whose node runs containers; ``up --argocd``: with
Argo CD and a Git server beside it); ``realnode up|down``
adds a real node beside a running one; ``demo``
runs the README's main job (``make demo``)."""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from . import build
from .cluster import ClusterState, DevCluster, StateDirInUse, default_state_dir


def dev_cluster(
    action: str,
    state_dir: Path | None,
    components: list[str] | None = None,
    local_only: bool = False,
    real_node: bool = False,
    with_argocd: bool = False,
) -> int:
    """``local_only``: ``up`` starts only the local (process) nodes, as the demo does, so it needs
    no kwok; the default adds the simulated nodes the tests use. ``real_node``: a cluster whose
    one node is the real node (containers), with the API server and ClusterIPs where its pods
    reach them, as ``e2e/test_realnode.py`` starts it."""
    directory = state_dir or default_state_dir()
    if action == "build":
        for name, path in build.ensure_all(components or None).items():
            print(f"{name}: {path}")
        return 0
    if action == "up":
        state = (
            _up_with_real_node(directory)
            if real_node
            else DevCluster(directory, nodes=[] if local_only else None).up()
        )
        print(f"control plane ready in {state.startup_seconds['total']:.1f}s", file=sys.stderr)
        if with_argocd:
            _up_argocd(state)
        print(env_exports(state))
        return 0
    if action == "down":
        from .realnode import lifecycle, node

        with_real_node = lifecycle.node_root(directory).joinpath("state.json").exists()
        lifecycle.down(directory, keep_address=True)  # the API server may still listen on its address
        DevCluster(directory).down()
        if with_real_node:
            node.remove_node_network()
        return 0
    try:
        state = ClusterState.load(directory)
    except FileNotFoundError:
        print(f"no cluster recorded in {directory}", file=sys.stderr)
        return 1
    if action == "env":
        print(env_exports(state))
    else:
        shown = {
            "server": state.server,
            "serviceProxy": state.service_proxy,
            "serviceCIDR": state.service_cidr,
            "podLoopback": state.pod_loopback,
            "pids": state.pids,
            "startup": state.startup_seconds,
        }
        print(json.dumps(shown, indent=2))
    return 0


def _up_argocd(state: ClusterState) -> None:
    """Argo CD beside the control plane; its processes are recorded with the cluster's, so
    ``down`` stops them too."""
    from . import argocd

    try:
        argo = argocd.start_argocd(Path(state.state_dir), Path(state.kubeconfig), state.server)
    except BaseException:
        DevCluster(Path(state.state_dir)).down()
        raise
    state.pids.update(argo.pids())
    state.save()
    print(
        f"Argo CD {build.ARGOCD_VERSION} ready (application controller, repo server, Redis on "
        f"127.0.0.1:{argo.ports.redis}); Git serves {argo.git_root} at git://127.0.0.1:{argo.ports.git}/NAME "
        f"(git init --bare {argo.git_root}/NAME; pushes are accepted)",
        file=sys.stderr,
    )


def _up_with_real_node(directory: Path) -> ClusterState:
    from .realnode import lifecycle, node

    node.add_node_network()
    dev = DevCluster(
        directory, nodes=[], local_nodes=[], api_address=node.NODE_IP, service_cidr=node.SERVICE_CIDR
    )
    state = dev.up()
    try:
        real = lifecycle.up(directory)
    except BaseException:
        dev.down()
        node.remove_node_network()
        raise
    print(f"real node {real.node} Ready; images: {json.dumps(real.images)}", file=sys.stderr)
    return state


def env_exports(state: ClusterState) -> str:
    """The shell lines ``env`` prints (``eval "$(mcp-devcluster env)"``): the cluster's KUBECONFIG,
    free ports for an operator run by hand (MCP_LIVENESS, MCP_METRICS_PORT) and, first on PATH,
    the directory of the kubectl built beside the API server (v1.36), so an older kubectl of the
    user's is not the one that runs."""
    lines = [f"export KUBECONFIG={shlex.quote(state.kubeconfig)}"]
    if state.operator_liveness:  # for `mcp-operator run` beside it: free ports, not the in-cluster ones
        lines.append(
            f"export MCP_LIVENESS={state.operator_liveness} MCP_METRICS_PORT={state.operator_metrics_port}"
        )
    kubectl = build.components()["kubernetes"].binary("kubectl")  # where it is; nothing is built
    if kubectl.is_file():
        lines.append(f'export PATH={shlex.quote(str(kubectl.parent))}:"$PATH"')
    else:
        print(
            f"{kubectl} is not built (mcp-devcluster build kubernetes): PATH is left as it is",
            file=sys.stderr,
        )
    return "\n".join(lines)


def _cmd_dev_cluster(args: argparse.Namespace) -> int:
    return dev_cluster(
        args.action,
        args.state_dir,
        getattr(args, "components", None),
        getattr(args, "local_only", False),
        getattr(args, "real_node", False),
        getattr(args, "argocd", False),
    )


def _cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    return run_demo(samples=args.samples, keep=args.keep, timeout_s=args.timeout, target=args.target)


def _cmd_image(args: argparse.Namespace) -> int:
    """``make image``: build, save, and load into the user's Docker when one answers."""
    from .realnode import lifecycle

    saved = lifecycle.release_images(args.operator, args.refserver, args.output)
    docker = shutil.which("docker")
    answers = docker is not None and subprocess.run([docker, "info"], capture_output=True).returncode == 0
    for name, archive in saved.items():
        if answers and docker is not None:
            subprocess.run([docker, "load", "-i", str(archive)], check=True, capture_output=True)
            print(f"{name}: loaded into your Docker (docker push {name})")
        else:
            print(f"{name}: {archive} (docker load -i {archive} && docker push {name})")
    return 0


def _cmd_stress(args: argparse.Namespace) -> int:
    from .stress import run_stressed

    pytest_args = args.pytest_args[1:] if args.pytest_args[:1] == ["--"] else args.pytest_args
    return run_stressed(pytest_args, args.runs, hog=not args.no_hog, cluster=not args.no_cluster)


def _cmd_realnode(args: argparse.Namespace) -> int:
    from .realnode import lifecycle

    directory = args.state_dir or default_state_dir()
    if args.action == "down":
        lifecycle.down(directory)
        return 0
    if args.action == "images":
        built, _ = lifecycle.prepare_images()
        print(json.dumps({"images": [built.pause, built.operator, built.refserver]}, indent=2))
        return 0
    note = lifecycle.pod_network_note(ClusterState.load(directory))
    state = lifecycle.up(directory)
    shown = {"node": state.node, "images": state.images, "startup": state.startup_seconds}
    print(json.dumps(shown, indent=2))
    if note:
        print(note, file=sys.stderr)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mcp-devcluster", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for action, text in (
        ("build", "build the control-plane binaries into the cache (once per version)"),
        ("up", "start the local control plane and print what env prints (eval it)"),
        ("down", "stop the local control plane"),
        ("env", "print the running control plane's KUBECONFIG, and its kubectl first on PATH (eval it)"),
        ("status", "print the running control plane's server, address ranges, pids and start-up times"),
    ):
        cmd = sub.add_parser(action, help=text)
        cmd.add_argument("--state-dir", type=Path, default=None)
        if action == "build":
            cmd.add_argument(
                "components",
                nargs="*",
                choices=[*build.components(), []],
                help="what to build (default: everything the tests use)",
            )
        if action == "up":
            cmd.add_argument(
                "--local-only",
                action="store_true",
                help="only the local nodes that run pods as processes (no kwok, nothing simulated)",
            )
            cmd.add_argument(
                "--argocd",
                action="store_true",
                help="also Argo CD's application controller and repo server (built from the Go "
                "module proxy), Redis and a Git server on loopback; the health checks of "
                "manifests/argocd installed",
            )
            cmd.add_argument(
                "--real-node",
                action="store_true",
                help="one real node (containerd, runc, a kubelet; needs root) and no other: the API "
                "server and ClusterIPs on addresses its pods reach, CoreDNS for Service names",
            )
        cmd.set_defaults(func=_cmd_dev_cluster, action=action)
    demo = sub.add_parser(
        "demo", help="control plane (if none is configured), operator, samples, verdict table"
    )
    demo.add_argument("--samples", type=Path, default=Path("manifests/samples"))
    demo.add_argument("--keep", action="store_true", help="leave the local control plane running")
    demo.add_argument("--timeout", type=float, default=300.0)
    demo.add_argument(
        "--target",
        choices=["refserver", "vllm"],
        default="refserver",
        help="what the samples run against: the reference server (default) or a real vLLM "
        "(its CPU build, installed on first use into ~/.cache/mcp-operator)",
    )
    demo.set_defaults(func=_cmd_demo)
    image = sub.add_parser(
        "image",
        help="make image: the operator's and the reference server's images from the Dockerfile, "
        "built offline by the harness's own Docker daemon (root), saved as archives and loaded "
        "into your Docker when one answers",
    )
    image.add_argument(
        "--operator", required=True, help="the operator image's name, e.g. REGISTRY/mcp-operator:TAG"
    )
    image.add_argument("--refserver", required=True, help="the reference server image's name")
    image.add_argument("--output", type=Path, default=Path(".out/images"))
    image.set_defaults(func=_cmd_image)
    stress = sub.add_parser(
        "stress",
        help="run pytest several times with one core kept busy and a second control plane up "
        "(make test-stress); arguments after -- go to pytest",
    )
    stress.add_argument("--runs", type=int, default=3)
    stress.add_argument("--no-hog", action="store_true", help="no CPU hog")
    stress.add_argument("--no-cluster", action="store_true", help="no second control plane")
    stress.add_argument("pytest_args", nargs=argparse.REMAINDER)
    stress.set_defaults(func=_cmd_stress)
    real = sub.add_parser(
        "realnode",
        help="a real node beside the running control plane: containerd, runc and a kubelet, "
        "with the operator's and the reference server's images built here",
    )
    real.add_argument(
        "action", choices=["up", "down", "images"], help="images: build and cache them only (make test does)"
    )
    real.add_argument("--state-dir", type=Path, default=None)
    real.set_defaults(func=_cmd_realnode)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except StateDirInUse as exc:  # `up` or the demo on a state directory another cluster runs from
        print(f"mcp-devcluster: {exc}", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
