"""Chaos Mesh's build and runner: the pure parts (the wrapper go.mod carrying the module's own
replace directives, the controller's environment, the daemon's command line, the EndpointSlice
the controller finds the daemon by, the nsexec shim's translation)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from mcp_devcluster import build, chaosmesh

# the shape of the module's go.mod: a local nested module, version pins, a comment, one single line
UPSTREAM_GO_MOD = """module github.com/chaos-mesh/chaos-mesh

go 1.25

require (
\tgithub.com/chaos-mesh/chaos-mesh/api v0.0.0
\tk8s.io/api v0.33.3
)

replace (
\tgithub.com/chaos-mesh/chaos-mesh/api => ./api
\tk8s.io/api => k8s.io/api v0.35.3 // pinned
\tk8s.io/client-go => k8s.io/client-go v0.35.3
)

replace github.com/opencontainers/runtime-spec => github.com/opencontainers/runtime-spec v1.2.0

replace example.org/old v1.0.0 => example.org/fork v1.0.1
"""

PORTS = chaosmesh.Ports(grpc=41767, http=41766, metrics=47080, webhook=47443)


def test_module_replaces_keeps_the_published_ones_and_drops_the_local_one() -> None:
    assert build.module_replaces(UPSTREAM_GO_MOD) == {
        "k8s.io/api": "v0.35.3",
        "k8s.io/client-go": "v0.35.3",
        "github.com/opencontainers/runtime-spec": "v1.2.0",
        "example.org/old": "example.org/fork v1.0.1",
    }


def test_the_wrapper_carries_the_module_replaces_and_points_api_at_its_published_version(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    component = build.components()["chaos-mesh"]
    monkeypatch.setattr(build, "_module_go_mod", lambda module, version: UPSTREAM_GO_MOD)
    text = build.wrapper_go_mod(component, build._resolve_replaces(component))
    assert f"require {chaosmesh.MODULE} {build.CHAOS_MESH_VERSION}\n" in text
    api = "github.com/chaos-mesh/chaos-mesh/api"
    assert f"\t{api} => {api} {build.CHAOS_MESH_API_VERSION}\n" in text
    assert "\tk8s.io/api => k8s.io/api v0.35.3\n" in text
    assert "\texample.org/old => example.org/fork v1.0.1\n" in text
    assert "./api" not in text


def test_only_chaos_mesh_builds_with_cgo() -> None:
    table = build.components()
    assert [name for name, c in table.items() if c.cgo] == ["chaos-mesh"]
    assert build._go_env(cgo=True)["CGO_ENABLED"] == "1" and build._go_env()["CGO_ENABLED"] == "0"
    assert {p.rsplit("/", 1)[1] for p in table["chaos-mesh"].packages} == {
        "chaos-controller-manager",
        "chaos-daemon",
    }
    assert chaosmesh.VERSION == build.CHAOS_MESH_VERSION


def test_controller_env_points_it_at_the_daemon_port_and_our_certificate(tmp_path: Path) -> None:
    env = chaosmesh.controller_env(tmp_path / "kubeconfig", tmp_path / "certs", PORTS)
    assert env["KUBECONFIG"] == str(tmp_path / "kubeconfig") and env["CERTS_DIR"] == str(tmp_path / "certs")
    assert env["NAMESPACE"] == chaosmesh.NAMESPACE and env["ENABLE_LEADER_ELECTION"] == "false"
    assert (env["CHAOS_DAEMON_SERVICE_PORT"], env["METRICS_PORT"], env["WEBHOOK_PORT"]) == (
        "41767",
        "47080",
        "47443",
    )


def test_the_daemon_runs_with_the_shim_on_usr_local_bin_in_a_mount_namespace_of_its_own(
    tmp_path: Path,
) -> None:
    argv = chaosmesh.daemon_argv(Path("/b/chaos-daemon"), tmp_path, Path("/run/x/containerd.sock"), PORTS)
    assert argv[:4] == ["unshare", "--mount", "--propagation", "private"]
    script, shim_dir, daemon, *flags = argv[6:]
    assert script == 'mount --bind "$0" /usr/local/bin && exec "$@"'
    assert (shim_dir, daemon) == (str(tmp_path), "/b/chaos-daemon")
    pairs = dict(zip(flags[::2], flags[1::2], strict=True))
    assert pairs == {
        "--runtime": "containerd",
        "--runtime-socket-path": "/run/x/containerd.sock",
        "--containerd-ns": "k8s.io",
        "--grpc-port": "41767",
        "--http-port": "41766",
    }


def test_the_endpoint_slice_names_the_node_its_address_and_the_grpc_port() -> None:
    body = chaosmesh.daemon_endpoint_slice("mcp-real", "10.213.0.2", 41767)
    assert body["metadata"] == {"name": "chaos-daemon-mcp-real", "namespace": "chaos-mesh"}
    (endpoint,) = body["endpoints"]
    assert endpoint["addresses"] == ["10.213.0.2"] and endpoint["nodeName"] == "mcp-real"
    assert body["ports"] == [{"name": "grpc", "port": 41767, "protocol": "TCP"}]


def test_the_nsexec_shim_translates_its_flags_to_nsenter(tmp_path: Path) -> None:
    """Run with an ``nsenter`` of ours on PATH that prints what it was given."""
    (tmp_path / "nsenter").write_text('#!/bin/sh\necho "$@"\n')
    (tmp_path / "nsenter").chmod(0o755)
    shim = chaosmesh._nsexec_dir(tmp_path / "shim") / "nsexec"
    assert os.access(shim, os.X_OK)
    out = subprocess.run(
        [str(shim), "-l", "-n", "/proc/7/ns/net", "-p", "/proc/7/ns/pid", "--", "iptables", "-w", "-S"],
        env={"PATH": f"{tmp_path}:/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.split() == [
        "--net=/proc/7/ns/net",
        "--pid=/proc/7/ns/pid",
        "--",
        "iptables",
        "-w",
        "-S",
    ]
