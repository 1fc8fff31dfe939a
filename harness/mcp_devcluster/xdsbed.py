"""The real xDS testbed as processes: one go-control-plane control plane (ADS, its own CSDS,
an HTTP admin API for snapshots) and N grpc-go xDS clients, each serving CSDS on its own port.

The binary (``data/xdsbed``) is built and cached by ``mcp_devcluster.build`` like luahealth.
Tests use it to make every state the xDS sync check must judge happen for real: all synced, a
snapshot one client NACKs, a client stopped (the control plane then reports it stale).
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from mcp_devcluster.build import binary
from mcp_devcluster.processes import ManagedProcess, accepts, free_port, http_ok, stop_pid, wait_until


@dataclass
class XdsClientProcess:
    node: str
    csds_port: int
    process: ManagedProcess

    @property
    def csds_address(self) -> str:
        return f"127.0.0.1:{self.csds_port}"


@dataclass
class XdsBed:
    """Start with ``start()`` (or as a context manager); every process is stopped by ``close()``."""

    state_dir: Path
    nodes: list[str]
    initial_version: str = "v1"
    executable: Path | None = None
    xds_port: int = 0
    admin_port: int = 0
    control_plane: ManagedProcess | None = None
    clients: dict[str, XdsClientProcess] = field(default_factory=dict)

    @property
    def control_plane_csds(self) -> str:
        return f"127.0.0.1:{self.xds_port}"

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.admin_port}"

    def _exe(self) -> str:
        if self.executable is None:
            self.executable = binary("xdsbed", "xdsbed")
        return str(self.executable)

    def start(self, *, timeout_s: float = 60.0) -> XdsBed:
        self.xds_port, self.admin_port = free_port(), free_port()
        argv = [self._exe(), "server", "--xds-port", str(self.xds_port), "--admin-port", str(self.admin_port)]
        argv += ["--nodes", ",".join(self.nodes), "--version", self.initial_version]
        self.control_plane = ManagedProcess("xds-control-plane", argv, self.state_dir / "control-plane.log")
        self.control_plane.start()
        wait_until(
            self.control_plane,
            lambda: http_ok(self.admin_url + "/healthz") and accepts(self.xds_port, timeout=0.5),
            timeout_s=timeout_s,
            what="serving xDS",
        )
        for node in self.nodes:
            self.start_client(node, timeout_s=timeout_s)
        return self

    def start_client(self, node: str, *, timeout_s: float = 60.0) -> XdsClientProcess:
        port = self.clients[node].csds_port if node in self.clients else free_port()
        argv = [self._exe(), "client", "--node", node, "--server", self.control_plane_csds]
        argv += ["--csds-port", str(port)]
        proc = ManagedProcess(f"xds-client-{node}", argv, self.state_dir / f"client-{node}.log")
        proc.start()
        wait_until(proc, lambda: accepts(port, timeout=0.5), timeout_s=timeout_s, what="serving CSDS")
        client = XdsClientProcess(node, port, proc)
        self.clients[node] = client
        return client

    def stop_client(self, node: str) -> None:
        """Stop one client: its stream closes and the control plane reports it stale."""
        proc = self.clients[node].process
        if proc.popen is not None:
            stop_pid(proc.popen.pid, grace_s=5)

    def set_snapshot(
        self, version: str, *, reject: tuple[str, ...] = (), nodes: tuple[str, ...] = ()
    ) -> None:
        """Give ``nodes`` (default: all) a new version; nodes in ``reject`` get a Cluster a gRPC
        client refuses, so they NACK it."""
        query = {"version": version}
        if reject:
            query["reject"] = ",".join(reject)
        if nodes:
            query["nodes"] = ",".join(nodes)
        url = f"{self.admin_url}/snapshot?{urllib.parse.urlencode(query)}"
        with urllib.request.urlopen(urllib.request.Request(url, method="POST"), timeout=10) as resp:
            json.load(resp)

    def close(self) -> None:
        for client in self.clients.values():
            if client.process.popen is not None:
                stop_pid(client.process.popen.pid, grace_s=5)
        if self.control_plane is not None and self.control_plane.popen is not None:
            stop_pid(self.control_plane.popen.pid, grace_s=5)

    def __enter__(self) -> XdsBed:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
