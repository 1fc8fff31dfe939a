"""Bring the real node up beside a running local control plane, and take it down again.

``up``: Debian packages, the kubelet and CoreDNS builds, the images (built once, then cached),
containerd with the images imported, the node's address, service range and pod network, the
cluster DNS, the kubelet; returns when the Node is Ready. ``down``: the kubelet, every
container, containerd, CoreDNS, the mounts, links and route, the kernel tunables as they were,
and the Node object. Both are safe to run again after a crash.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import shutil
import time
from pathlib import Path

from kubernetes import client, config

from .. import build
from ..certs import PkiPaths
from ..cluster import ClusterState
from ..processes import stop_pid
from . import debs, dns, images, node, runtime


def node_root(cluster_state_dir: Path) -> Path:
    return cluster_state_dir / "realnode"


def _runtime_paths(cluster_state_dir: Path) -> runtime.RuntimePaths:
    root = node_root(cluster_state_dir)
    return runtime.RuntimePaths(root / "containerd", runtime.short_run_dir(root, "containerd"))


def _saved_archive(daemon: images.BuildDaemon, image: str) -> Path:
    """``docker save`` of ``image`` once per image name (names carry their inputs' digest); the
    archives of the same repository's other tags (earlier sources) are removed."""
    repository = image.rsplit(":", 1)[0].replace("/", "_")
    archive = images.images_dir() / f"{repository}_{image.rsplit(':', 1)[1]}.tar"
    if not archive.is_file():
        partial = archive.with_suffix(".partial")
        daemon.save(image, partial)
        partial.rename(archive)
    for stale in images.images_dir().glob(f"{repository}_*.tar"):
        if stale != archive:
            stale.unlink()
    return archive


def prepare_images(run_dir: Path = images.DOCKER_RUN_DIR) -> tuple[images.NodeImages, list[Path]]:
    """Build what is missing (``make test`` does it before the tests) and ``docker save`` each
    image the node imports; a Docker daemon runs for as long as that takes."""
    debs.ensure_packages()
    lock_path = build.cache_root() / "docker.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    # one Docker daemon at a time on the cached data (two clones' test runs at once share it)
    with lock_path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        daemon = images.BuildDaemon(run_dir)
        daemon.start()
        try:
            built = images.build_all(daemon)
            names = (built.pause, built.operator, built.refserver)
            archives = [_saved_archive(daemon, name) for name in names]
            images.prune(daemon, [built.base, *names])
        finally:
            daemon.stop()
            node.unmount_under(run_dir)
    return built, archives


def release_images(operator: str, refserver: str, output: Path) -> dict[str, Path]:
    """``make image``: the operator's and the reference server's images, built as the real node's
    are (the Dockerfile, offline), tagged with the names a user pushes and saved as archives in
    ``output`` (``docker load -i``); returns name → archive."""
    debs.ensure_packages()
    output.mkdir(parents=True, exist_ok=True)
    lock_path = build.cache_root() / "docker.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    saved: dict[str, Path] = {}
    with lock_path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        daemon = images.BuildDaemon(images.DOCKER_RUN_DIR)
        daemon.start()
        try:
            base = images.base_image(daemon)
            built = {
                operator: images.operator_image(daemon, base),
                refserver: images.refserver_image(daemon, base),
            }
            for name, source in built.items():
                daemon.docker("tag", source, name)
                archive = output / f"{name.replace('/', '_').replace(':', '_')}.tar"
                saved[name] = daemon.save(name, archive)
                daemon.docker("rmi", name)  # the tag only: the cache keeps the build under its digest
        finally:
            daemon.stop()
            node.unmount_under(images.DOCKER_RUN_DIR)
    return saved


def pod_network_note(cluster: ClusterState) -> str | None:
    """What a real node's pods in the pod network cannot reach on this cluster, or None: a
    cluster started without ``--real-node`` has loopback ClusterIPs and an API server on
    loopback, which only ``hostNetwork`` pods share."""
    if cluster.service_cidr == node.SERVICE_CIDR:
        return None
    return (
        f"this cluster's ClusterIPs ({cluster.service_cidr}) and API server ({cluster.server}) are on "
        "loopback: on the real node only hostNetwork pods reach them. For pods in the pod network "
        "(Services, cluster DNS, the operator's token): mcp-devcluster down && mcp-devcluster up --real-node"
    )


def up(cluster_state_dir: Path, timeout_s: float = 120) -> node.RealNodeState:
    """The node Ready; on any failure what was started is taken down again."""
    root = node_root(cluster_state_dir)
    if (root / "state.json").exists():
        down(cluster_state_dir, keep_address=True)
    node.unmount_under(root)
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    try:
        return _up(cluster_state_dir, root, timeout_s)
    except BaseException:
        down(cluster_state_dir, keep_address=True)
        raise


def _up(cluster_state_dir: Path, root: Path, timeout_s: float) -> node.RealNodeState:
    cluster = ClusterState.load(cluster_state_dir)
    timings: dict[str, float] = {}
    began = time.monotonic()
    timings["packages"] = debs.ensure_packages()
    t = time.monotonic()
    build.ensure_all(["kubernetes-node", "coredns"])
    timings["builds"] = time.monotonic() - t
    t = time.monotonic()
    built, archives = prepare_images()
    timings["images"] = time.monotonic() - t
    state = node.RealNodeState(
        root=str(root),
        node=node.NODE_NAME,
        node_ip=node.NODE_IP,
        tunables=node.read_tunables(),
        images={
            "pause": images.containerd_name(built.pause),
            "operator": images.containerd_name(built.operator),
            "refserver": images.containerd_name(built.refserver),
        },
    )
    state.save()
    paths = _runtime_paths(cluster_state_dir)
    paths.cni_conf_dir.mkdir(parents=True, exist_ok=True)
    (paths.cni_conf_dir / "10-mcp-real.conflist").write_text(
        json.dumps(node.cni_config(node.BRIDGE, node.POD_CIDR, root / "cni-leases"), indent=2)
    )
    t = time.monotonic()
    containerd = runtime.start_containerd(paths, state.images["pause"], root / "containerd.log")
    assert containerd.popen is not None
    state.pids["containerd"] = containerd.popen.pid
    state.save()
    for archive in archives:
        runtime.import_image(paths, archive)
    timings["containerd"] = time.monotonic() - t
    node.add_node_network()
    coredns, timings["coredns"] = dns.start_coredns(root, Path(cluster.kubeconfig), node.NODE_IP, timeout_s)
    assert coredns.popen is not None
    state.pids["coredns"] = coredns.popen.pid
    state.save()
    kubelet, timings["kubelet"] = node.start_kubelet(
        root, Path(cluster.kubeconfig), PkiPaths(cluster_state_dir / "pki"), paths, timeout_s
    )
    assert kubelet.popen is not None
    state.pids["kubelet"] = kubelet.popen.pid
    timings["total"] = time.monotonic() - began
    state.startup_seconds = {k: round(v, 2) for k, v in timings.items()}
    state.save()
    return state


def down(cluster_state_dir: Path, *, keep_address: bool = False) -> None:
    """``keep_address``: leave the node's address and service route (an API server still
    listening on the one, a service proxy on the other)."""
    root = node_root(cluster_state_dir)
    try:
        state = node.RealNodeState.load(root)
    except FileNotFoundError:
        return
    paths = _runtime_paths(cluster_state_dir)
    if "kubelet" in state.pids:
        stop_pid(state.pids["kubelet"])
    if "containerd" in state.pids:
        node.remove_containers(paths)
        stop_pid(state.pids["containerd"])
    if "coredns" in state.pids:
        stop_pid(state.pids["coredns"])
    node.unmount_under(root)
    node.unmount_under(paths.run)
    shutil.rmtree(paths.run, ignore_errors=True)
    node.restore_tunables(state.tunables)
    node.remove_kubelet_chains()
    with contextlib.suppress(Exception):
        cluster = ClusterState.load(cluster_state_dir)
        api = client.CoreV1Api(config.new_client_from_config(cluster.kubeconfig))
        api.delete_node(state.node)
    node.remove_links(node.BRIDGE)
    if not keep_address:
        node.remove_node_network()
    (root / "state.json").unlink(missing_ok=True)
