"""What the GPU model server's tests share: the server module (measurements/gpu_model_server/
server.py, loaded from its file: it imports PyTorch only where a model runs, so its split
arithmetic, plan wire format, PNG decoder and metrics load anywhere), a Python that has PyTorch to
run the server, and servers started in subprocesses on free ports.

PyTorch is not in the project's environment: the server runs under this Python when it has
PyTorch (with gloo) and aiohttp, else under the vLLM CPU environment (installed on first use
under ~/.cache/mcp-operator/venvs/, as the vLLM e2e tests do); the tests that start one are
skipped, saying why, only where that environment cannot be had (vLLM's own reasons: platform,
disk)."""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest

from mcp_devcluster.vllm import VllmUnavailable, ensure_vllm

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "measurements" / "gpu_model_server" / "server.py"


def load_module(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="session")
def gms() -> ModuleType:
    return load_module(SERVER, "gpu_model_server")


@pytest.fixture(scope="session")
def merge_traces() -> ModuleType:
    return load_module(ROOT / "measurements" / "multi_gpu" / "merge_traces.py", "merge_traces")


def _has_torch(python: str) -> bool:
    probe = subprocess.run(
        [python, "-c", "import torch.distributed as d, aiohttp; assert d.is_gloo_available()"],
        capture_output=True,
        timeout=120,
    )
    return probe.returncode == 0


@pytest.fixture(scope="session")
def torch_python() -> str:
    """This Python when it has PyTorch, else the vLLM CPU environment's, installed now when it is
    not yet (the vLLM e2e tests install the same one; a lock keeps it to one install); skipped,
    saying why, where none can be had. Installed here rather than found: on a fresh machine the
    environment does not exist yet when these tests run, and they must not skip for that."""
    if _has_torch(sys.executable):
        return sys.executable
    try:
        python, _ = ensure_vllm()
    except VllmUnavailable as exc:
        pytest.skip(f"no Python with PyTorch (gloo) and aiohttp: {exc}; the model server cannot start")
    if not _has_torch(str(python)):
        pytest.skip(f"the vLLM CPU environment's Python ({python}) lacks PyTorch with gloo or aiohttp")
    return str(python)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(proc: subprocess.Popen[bytes], port: int, deadline: float) -> None:
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                out = proc.stdout.read().decode() if proc.stdout else ""
                pytest.fail(f"the GPU model server did not start: {out[-3000:]}")
            time.sleep(0.2)


def _stop(proc: subprocess.Popen[bytes]) -> str:
    proc.terminate()
    try:
        out, _ = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    return out.decode(errors="replace")


@pytest.fixture(scope="module")
def serve(torch_python: str) -> Iterator[Callable[..., list[str]]]:
    """``serve(ARGS, ARGS, ...)``: one server per argument list, started side by side, each on a
    free port; their URLs once every one listens. Stopped after the module's tests, and none may
    have printed a traceback."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(*arg_lists: list[str]) -> list[str]:
        started = []
        for args in arg_lists:
            port = free_port()
            proc = subprocess.Popen(
                [torch_python, str(SERVER), *args, "--port", str(port)],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env={**os.environ, "OMP_NUM_THREADS": "1"},
            )
            procs.append(proc)
            started.append((proc, port))
        deadline = time.monotonic() + 180
        for proc, port in started:
            _wait(proc, port, deadline)
        return [f"http://127.0.0.1:{port}" for _, port in started]

    try:
        yield start
    finally:
        logs = [_stop(p) for p in procs]
    for log in logs:
        assert "Traceback" not in log, log[-3000:]
