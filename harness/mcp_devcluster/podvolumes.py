"""ConfigMap and Secret volumes for the local runner's pods, mounted where the pod spec says.

Why: a pod that reads a file from a mounted ConfigMap (an MCPBenchmark's dataset) must find it
at its ``mountPath`` here as in a cluster. A process sees the host's filesystem, so the kubelet
writes each volume's files under the pod's directory and starts the container in a private mount
namespace (``unshare --mount``) whose first act is to bind-mount them, read-only, onto their
mount paths: the host and other pods never see them. That needs root; without it a pod with
such a mount cannot run here, and says so. Other volume kinds (emptyDir) are not mounted: the
process uses the host's directories, as before.
"""

from __future__ import annotations

import base64
import os
import shlex
import shutil
from pathlib import Path, PurePosixPath

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from .podenv import ContainerSpecError


def _files(core: client.CoreV1Api, ns: str, volume: client.V1Volume) -> dict[str, bytes] | None:
    """The files a ConfigMap or Secret volume holds (path -> bytes), or None for other kinds."""
    source = volume.config_map or volume.secret
    if source is None:
        return None
    name = source.name if volume.config_map is not None else source.secret_name
    try:
        if volume.config_map is not None:
            cm = core.read_namespaced_config_map(name, ns)
            data = {k: v.encode() for k, v in (cm.data or {}).items()}
            data.update({k: base64.b64decode(v) for k, v in (cm.binary_data or {}).items()})
        else:
            secret = core.read_namespaced_secret(name, ns)
            data = {k: base64.b64decode(v) for k, v in (secret.data or {}).items()}
    except ApiException as exc:
        if exc.status == 404 and source.optional:
            return {}
        kind = "configmap" if volume.config_map is not None else "secret"
        raise ContainerSpecError(f"volume {volume.name}: {kind} {ns}/{name}: {exc.reason}") from exc
    if not source.items:
        return data
    out = {}
    for item in source.items:
        if item.key not in data:
            raise ContainerSpecError(f"volume {volume.name}: no key {item.key!r} in {name}")
        out[item.path] = data[item.key]
    return out


def _write(root: Path, volume: str, files: dict[str, bytes]) -> bool:
    """The volume's files as they should be: the ones gone removed first, then each changed one
    replaced at once (a reader sees the old content or the new, never half, and once it sees new
    content, no key that went is left beside it: the kubelet swaps the whole directory, which
    gives that and more); True when any changed."""
    wanted: dict[Path, bytes] = {}
    for rel, data in files.items():
        path = PurePosixPath(rel)
        if path.is_absolute() or ".." in path.parts:
            raise ContainerSpecError(f"volume {volume}: item path {rel!r} leaves the volume")
        wanted[root / path] = data
    changed = False
    for stale in [p for p in root.rglob("*") if p.is_file() and p not in wanted]:
        stale.unlink()
        changed = True
    for target, data in wanted.items():
        if target.is_file() and target.read_bytes() == data:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f".{target.name}.partial")
        partial.write_bytes(data)
        os.replace(partial, target)
        changed = True
    return changed


def materialize(core: client.CoreV1Api, pod: client.V1Pod, pod_dir: Path) -> dict[str, Path]:
    """Write every ConfigMap and Secret volume of the pod under ``pod_dir/volumes``; by name."""
    out: dict[str, Path] = {}
    for volume in pod.spec.volumes or []:
        files = _files(core, pod.metadata.namespace, volume)
        if files is None:
            continue
        root = pod_dir / "volumes" / volume.name
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        _write(root, volume.name, files)
        out[volume.name] = root
    return out


def refresh(core: client.CoreV1Api, pod: client.V1Pod, pod_dir: Path) -> list[str]:
    """Bring a running pod's ConfigMap and Secret volumes up to date, as a kubelet's volume
    manager does (the mounts see the directories, so the container sees the new files); the
    names of the volumes that changed. A source that is gone keeps the files it had."""
    changed = []
    for volume in pod.spec.volumes or []:
        root = pod_dir / "volumes" / volume.name
        if not root.is_dir():
            continue
        try:
            files = _files(core, pod.metadata.namespace, volume)
        except ContainerSpecError:
            continue
        if files is not None and _write(root, volume.name, files):
            changed.append(volume.name)
    return changed


def mount_prefix(spec: client.V1Container, volumes: dict[str, Path]) -> list[str]:
    """The argv prefix that runs a container's command with its volumes mounted (empty when it
    mounts none of them)."""
    mounts = [(volumes[m.name], m.mount_path) for m in spec.volume_mounts or [] if m.name in volumes]
    if not mounts:
        return []
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        raise ContainerSpecError(
            f"container {spec.name!r} mounts a ConfigMap or Secret volume: the local runner needs root "
            "and unshare to mount it"
        )
    steps = []
    for source, target in mounts:
        src, dst = shlex.quote(str(source)), shlex.quote(target)
        steps.append(f"mkdir -p {dst} && mount --bind {src} {dst} && mount -o remount,bind,ro {dst}")
    script = " && ".join(steps) + ' && exec "$@"'
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "mount"]
