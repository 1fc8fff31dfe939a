"""ConfigMap and Secret volumes of the local runner's pods: their files written under the pod's
directory (items mapped, keys checked), and bind-mounted read-only at their mountPath inside the
container's own mount namespace only."""

from __future__ import annotations

import base64
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from mcp_devcluster.containers import start_container
from mcp_devcluster.podenv import ContainerSpecError
from mcp_devcluster.podvolumes import materialize, mount_prefix, refresh


class FakeCore:
    """What ``materialize`` reads: ConfigMaps and Secrets by name."""

    def __init__(self, config_maps: dict[str, dict[str, str]], secrets: dict[str, dict[str, bytes]]) -> None:
        self.config_maps, self.secrets = config_maps, secrets

    def read_namespaced_config_map(self, name: str, ns: str) -> client.V1ConfigMap:
        if name not in self.config_maps:
            raise ApiException(status=404, reason="Not Found")
        return client.V1ConfigMap(data=self.config_maps[name])

    def read_namespaced_secret(self, name: str, ns: str) -> client.V1Secret:
        data = {k: base64.b64encode(v).decode() for k, v in self.secrets[name].items()}
        return client.V1Secret(data=data)


def _pod(volumes: list[client.V1Volume], mounts: list[client.V1VolumeMount], script: str) -> client.V1Pod:
    container = client.V1Container(name="c", command=["sh", "-c", script], volume_mounts=mounts)
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name="p", namespace="ns"),
        spec=client.V1PodSpec(containers=[container], volumes=volumes),
    )


def _core() -> Any:
    return FakeCore({"prompts": {"a.jsonl": '{"prompt": "x"}\n', "other": "o"}}, {"key": {"k": b"\x00\x01"}})


def test_files_are_written_with_items_mapped(tmp_path: Path) -> None:
    items = [client.V1KeyToPath(key="a.jsonl", path="data/set.jsonl")]
    pod = _pod(
        [
            client.V1Volume(name="d", config_map=client.V1ConfigMapVolumeSource(name="prompts", items=items)),
            client.V1Volume(name="s", secret=client.V1SecretVolumeSource(secret_name="key")),
            client.V1Volume(name="tmp", empty_dir=client.V1EmptyDirVolumeSource()),
        ],
        [],
        "true",
    )
    volumes = materialize(_core(), pod, tmp_path)
    assert sorted(volumes) == ["d", "s"]  # emptyDir is not the runner's to mount
    assert (volumes["d"] / "data" / "set.jsonl").read_text() == '{"prompt": "x"}\n'
    assert not (volumes["d"] / "other").exists()
    assert (volumes["s"] / "k").read_bytes() == b"\x00\x01"


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (client.V1ConfigMapVolumeSource(name="missing"), "configmap ns/missing: Not Found"),
        (
            client.V1ConfigMapVolumeSource(name="prompts", items=[client.V1KeyToPath(key="x", path="x")]),
            "no key",
        ),
        (
            client.V1ConfigMapVolumeSource(
                name="prompts", items=[client.V1KeyToPath(key="other", path="../x")]
            ),
            "leaves the volume",
        ),
    ],
)
def test_unusable_volumes_say_why(
    tmp_path: Path, source: client.V1ConfigMapVolumeSource, message: str
) -> None:
    pod = _pod([client.V1Volume(name="d", config_map=source)], [], "true")
    with pytest.raises(ContainerSpecError, match=message):
        materialize(_core(), pod, tmp_path)


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root and unshare")
def test_the_container_reads_the_volume_at_its_mount_path_and_the_host_does_not(tmp_path: Path) -> None:
    target = f"/var/run/mcp-devcluster-test-{os.getpid()}"
    pod = _pod(
        [client.V1Volume(name="d", config_map=client.V1ConfigMapVolumeSource(name="prompts"))],
        [client.V1VolumeMount(name="d", mount_path=target, read_only=True)],
        f"cat {target}/a.jsonl; touch {target}/new 2>/dev/null && echo writable || echo read-only",
    )
    (spec,) = pod.spec.containers
    volumes = materialize(_core(), pod, tmp_path)
    try:
        running = start_container(spec, {}, tmp_path, mount_prefix(spec, volumes))
        assert running.proc.wait(timeout=30) == 0
        assert running.log_path.read_text() == '{"prompt": "x"}\nread-only\n'
        assert not Path(target, "a.jsonl").exists()  # mounted in the container's namespace only
    finally:
        shutil.rmtree(target, ignore_errors=True)


def test_a_container_without_such_mounts_runs_as_before() -> None:
    spec = client.V1Container(
        name="c", command=["true"], volume_mounts=[client.V1VolumeMount(name="tmp", mount_path="/tmp")]
    )
    assert mount_prefix(spec, {"d": Path("/x")}) == []


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root and unshare")
def test_a_changed_config_map_reaches_the_running_container_in_place(tmp_path: Path) -> None:
    """The kubelet's volume refresh rewrites the files in the mounted directory: a container that
    is already running reads the new content, a key that went is gone, nothing restarts."""
    target = f"/var/run/mcp-devcluster-refresh-{os.getpid()}"
    core = _core()
    script = (
        f'for i in $(seq 100); do if [ "$(cat {target}/other)" = new ]; then ls {target}; exit 0; fi; '
        "sleep 0.1; done; exit 1"
    )
    pod = _pod(
        [client.V1Volume(name="d", config_map=client.V1ConfigMapVolumeSource(name="prompts"))],
        [client.V1VolumeMount(name="d", mount_path=target, read_only=True)],
        script,
    )
    (spec,) = pod.spec.containers
    volumes = materialize(core, pod, tmp_path)
    try:
        running = start_container(spec, {}, tmp_path, mount_prefix(spec, volumes))
        assert refresh(core, pod, tmp_path) == []  # nothing changed yet
        core.config_maps["prompts"] = {"other": "new"}
        assert refresh(core, pod, tmp_path) == ["d"]
        assert running.proc.wait(timeout=30) == 0
        assert running.log_path.read_text() == "other\n"  # a.jsonl went with its key
        assert refresh(core, pod, tmp_path) == []
    finally:
        shutil.rmtree(target, ignore_errors=True)
