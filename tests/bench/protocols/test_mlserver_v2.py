"""The Triton V2 clients against a real third-party server: MLServer, serving a tiny custom model
(``mlserver_model/``: OUTPUT0 is the row sum of INPUT0; no ML library involved).

MLServer pins its own web stack (FastAPI, Starlette, uvloop) and brings ~300 MB (pandas,
OpenTelemetry, aiokafka); keeping it out of the project's environment keeps those pins from
ever constraining ours. It lives in a venv keyed by version under the user cache, created on
first use (about a minute) and reused by later runs and fresh clones. To create it ahead of
time (e.g. in CI)::

    .venv/bin/python tests/bench/protocols/test_mlserver_v2.py
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http.aio as thttp

from mcp_bench.protocols.triton import TritonClient, TritonOptions
from mcp_bench.records import ErrorKind, RequestPayload, RequestRecord

MLSERVER_VERSION = "1.7.1"


class MlserverUnavailable(RuntimeError):
    """MLServer could not be installed here; the message says why."""


def venv_dir() -> Path:
    cache = Path(os.environ.get("MCP_OPERATOR_CACHE", "~/.cache/mcp-operator")).expanduser()
    return cache / "venvs" / f"mlserver-{MLSERVER_VERSION}"


def ensure_mlserver(timeout_s: float = 900) -> Path:
    """Path of the ``mlserver`` executable, installing it first when missing (under a file lock)."""
    venv = venv_dir()
    exe = venv / "bin" / "mlserver"
    done = venv / ".complete"
    if done.exists() and exe.exists():
        return exe
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f".mlserver-{MLSERVER_VERSION}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists() and exe.exists():
            return exe
        try:
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True, timeout=120)
            res = subprocess.run(
                [
                    str(venv / "bin" / "pip"),
                    "install",
                    "-q",
                    "--disable-pip-version-check",
                    f"mlserver=={MLSERVER_VERSION}",
                ],
                capture_output=True,
                text=True,
                timeout=timeout_s,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise MlserverUnavailable(f"cannot create {venv}: {exc}") from exc
        if res.returncode != 0 or not exe.exists():
            raise MlserverUnavailable(f"pip install mlserver=={MLSERVER_VERSION} failed: {res.stderr[-800:]}")
        done.write_text(MLSERVER_VERSION + "\n")
    return exe


MODEL_DIR = Path(__file__).parent / "mlserver_model"
MODEL = "sum-model"


@dataclass
class Mlserver:
    http: str
    grpc: str


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def mlserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mlserver]:
    try:
        exe = ensure_mlserver()
    except MlserverUnavailable as exc:
        pytest.skip(f"MLServer {MLSERVER_VERSION} cannot be installed here: {exc}")
    work = tmp_path_factory.mktemp("mlserver")
    for name in ("sum_model.py", "model-settings.json"):
        shutil.copy(MODEL_DIR / name, work / name)
    http_port, grpc_port, metrics_port = free_port(), free_port(), free_port()
    settings = {
        "host": "127.0.0.1",
        "http_port": http_port,
        "grpc_port": grpc_port,
        "metrics_port": metrics_port,
        "parallel_workers": 0,
    }
    (work / "settings.json").write_text(json.dumps(settings))
    log = (work / "mlserver.log").open("w")
    proc = subprocess.Popen([str(exe), "start", str(work)], cwd=work, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 90
        while True:
            if proc.poll() is not None:
                pytest.fail(
                    f"mlserver exited with {proc.returncode}: {(work / 'mlserver.log').read_text()[-2000:]}"
                )
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{http_port}/v2/models/{MODEL}/ready", timeout=2
                ) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"mlserver not ready in 90 s: {(work / 'mlserver.log').read_text()[-2000:]}")
            time.sleep(0.25)
        yield Mlserver(http=f"127.0.0.1:{http_port}", grpc=f"127.0.0.1:{grpc_port}")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        log.close()


async def run(client: TritonClient, n: int) -> tuple[list[RequestRecord], dict[str, str]]:
    await client.open()
    try:
        return [await client.send(RequestPayload()) for _ in range(n)], await client.fingerprint()
    finally:
        await client.close()


@pytest.mark.parametrize("use_grpc", [False, True], ids=["http", "grpc"])
async def test_triton_clients_against_mlserver(mlserver: Mlserver, use_grpc: bool) -> None:
    url = mlserver.grpc if use_grpc else mlserver.http
    client = TritonClient(url, MODEL, use_grpc=use_grpc, options=TritonOptions(outputs=["OUTPUT0"], dim=5))
    recs, fp = await run(client, 5)
    assert all(r.ok for r in recs), [r.error_detail for r in recs]
    assert all(r.e2e_ns > 0 for r in recs)
    assert fp["server_name"] == "mlserver" and fp["server_version"] == MLSERVER_VERSION
    assert client.input_specs[0].shape == [1, 5]  # taken from MLServer's model metadata
    if not use_grpc:
        assert client.binary_data is False  # MLServer does not list binary_tensor_data


async def test_mlserver_computes_what_we_sent(mlserver: Mlserver) -> None:
    client = thttp.InferenceServerClient(mlserver.http)
    try:
        x = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.float32)
        inp = thttp.InferInput("INPUT0", [2, 3], "FP32")
        inp.set_data_from_numpy(x, binary_data=False)
        res = await client.infer(
            MODEL,
            [inp],
            outputs=[thttp.InferRequestedOutput("OUTPUT0", binary_data=False)],
            headers={"Content-Type": "application/json"},
        )
        assert res.as_numpy("OUTPUT0").tolist() == [[6.0], [15.0]]
    finally:
        await client.close()


async def test_forcing_binary_tensors_on_mlserver_is_counted_not_fatal(mlserver: Mlserver) -> None:
    client = TritonClient(mlserver.http, MODEL, options=TritonOptions(binary_data=True, outputs=["OUTPUT0"]))
    recs, _ = await run(client, 3)
    # MLServer answers 500; uvicorn may then drop the kept-alive connection, which the next
    # request finds closed: each failure is counted under what really happened.
    assert recs[0].error is ErrorKind.HTTP_STATUS and recs[0].status == 500
    assert all(r.error in (ErrorKind.HTTP_STATUS, ErrorKind.DISCONNECTED) for r in recs)


if __name__ == "__main__":
    print(ensure_mlserver())
