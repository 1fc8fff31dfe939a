"""Triton / KServe V2 client over HTTP and gRPC against the reference server."""

from __future__ import annotations

import statistics
from typing import Any

import pytest
from pydantic import ValidationError

from mcp_bench.plan import RunPlan
from mcp_bench.protocols import protocol_factory
from mcp_bench.protocols.triton import InputSpec, TritonClient, TritonOptions, make_array, strip_scheme
from mcp_bench.records import ErrorKind, RequestPayload, RequestRecord
from mcp_refserver import Faults, RefServerConfig, RunningServer, start_refserver

pytestmark = pytest.mark.timing  # run under load by `make test-stress`

INFER_MS = 4.0


def target(srv: RunningServer, use_grpc: bool) -> str:
    assert srv.grpc_url is not None
    return srv.grpc_url if use_grpc else srv.url


async def send_n(client: TritonClient, n: int) -> list[RequestRecord]:
    await client.open()
    try:
        return [await client.send(RequestPayload()) for _ in range(n)]
    finally:
        await client.close()


@pytest.mark.parametrize("use_grpc", [False, True], ids=["http", "grpc"])
async def test_round_trip_from_model_metadata(use_grpc: bool) -> None:
    async with await start_refserver(RefServerConfig(infer_ms=INFER_MS, grpc_port=0)) as srv:
        opts = TritonOptions(outputs=["OUTPUT0", "OUTPUT1"], dim=8)
        client = TritonClient(target(srv, use_grpc), "refmodel", use_grpc=use_grpc, options=opts)
        recs = await send_n(client, 6)
        assert [s.shape for s in client.input_specs] == [[1, 8]]  # -1 dims resolved from metadata
        assert client.binary_data is (not use_grpc)  # HTTP: the server lists binary_tensor_data
        assert srv.model.stats.success.count == 6
    assert all(r.ok for r in recs), [r.error_detail for r in recs]
    assert {r.status for r in recs} == ({None} if use_grpc else {200})
    assert all(r.first_token_ns is None and r.e2e_ns / 1e6 >= INFER_MS for r in recs)
    # no timer or poll in the client's path (gRPC's would add tens of ms); not a speed test, since
    # the server shares this process's loop and a busy host stretches both
    assert statistics.median(r.e2e_ns / 1e6 for r in recs) < INFER_MS + 25


@pytest.mark.parametrize("use_grpc", [False, True], ids=["http", "grpc"])
async def test_explicit_inputs_and_json_tensors(use_grpc: bool) -> None:
    async with await start_refserver(RefServerConfig(infer_ms=1, grpc_port=0)) as srv:
        opts = TritonOptions.model_validate(
            {
                "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [2, 2], "data": [1, 2, 3, 4]}],
                "binary_data": False,
            }
        )
        client = TritonClient(target(srv, use_grpc), "refmodel", use_grpc=use_grpc, options=opts)
        recs = await send_n(client, 2)
    assert all(r.ok for r in recs)


@pytest.mark.parametrize("use_grpc", [False, True], ids=["http", "grpc"])
async def test_server_errors_and_timeouts_are_counted(use_grpc: bool) -> None:
    cfg = RefServerConfig(infer_ms=1, grpc_port=0, faults=Faults(error_rate=1, error_status=503))
    async with await start_refserver(cfg) as srv:
        recs = await send_n(TritonClient(target(srv, use_grpc), "refmodel", use_grpc=use_grpc), 2)
    assert [r.error for r in recs] == [ErrorKind.HTTP_STATUS] * 2
    assert {r.status for r in recs} == ({13} if use_grpc else {503})  # gRPC INTERNAL is code 13
    assert all("injected error" in r.error_detail for r in recs)

    cfg = RefServerConfig(infer_ms=1, grpc_port=0, faults=Faults(stall_rate=1, stall_s=5))
    async with await start_refserver(cfg) as srv:
        client = TritonClient(target(srv, use_grpc), "refmodel", use_grpc=use_grpc, timeout_s=0.3)
        client.opts = TritonOptions(inputs=[InputSpec(name="INPUT0", datatype="FP32", shape=[1, 2])])
        recs = await send_n(client, 2)
    assert [r.error for r in recs] == [ErrorKind.TIMEOUT] * 2, [r.error_detail for r in recs]


@pytest.mark.parametrize("use_grpc", [False, True], ids=["http", "grpc"])
async def test_refused_connection(use_grpc: bool, closed_port: int) -> None:
    opts = TritonOptions(inputs=[InputSpec(name="INPUT0", datatype="FP32", shape=[1, 2])], binary_data=True)
    client = TritonClient(f"127.0.0.1:{closed_port}", "m", use_grpc=use_grpc, options=opts)
    recs = await send_n(client, 1)
    assert recs[0].error is ErrorKind.CONNECT, recs[0].error_detail


@pytest.mark.parametrize("use_grpc", [False, True], ids=["http", "grpc"])
async def test_fingerprint(use_grpc: bool, fingerprint_of: Any) -> None:
    async with await start_refserver(RefServerConfig(grpc_port=0, server_version="9.8.7")) as srv:
        fp = await fingerprint_of(TritonClient(target(srv, use_grpc), "refmodel", use_grpc=use_grpc))
    assert fp == {
        "server_name": "mcp-refserver",
        "server_version": "9.8.7",
        "extensions": "binary_tensor_data,statistics",
    }


@pytest.mark.parametrize(("backend", "grpc_mode"), [("triton-http", False), ("triton-grpc", True)])
def test_registered_backends_build_from_a_plan(backend: str, grpc_mode: bool) -> None:
    plan = RunPlan.model_validate(
        {
            "url": "http://127.0.0.1:9" if not grpc_mode else "127.0.0.1:9",
            "backend": backend,
            "model": "m",
            "levels": {"rate": [5]},
            "stage": {"requests": 1},
            "payload": {"options": {"model_version": "2", "dim": 4}},
        }
    )
    client = protocol_factory(backend)(plan, 3)
    assert isinstance(client, TritonClient)
    assert client.use_grpc is grpc_mode and client.url == "127.0.0.1:9" and client.opts.model_version == "2"


def test_unknown_option_names_the_field() -> None:
    with pytest.raises(ValidationError, match="dimm"):
        TritonOptions.model_validate({"dimm": 3})


def test_make_array_types_and_errors() -> None:
    import random

    rng = random.Random(0)
    assert make_array(InputSpec(name="a", datatype="INT64", shape=[2, 3]), rng).dtype.name == "int64"
    assert make_array(InputSpec(name="b", datatype="BYTES", shape=[2]), rng).tolist() == [b"mcp-bench"] * 2
    assert make_array(InputSpec(name="c", datatype="FP32", shape=[2], data=[1, 2]), rng).tolist() == [
        1.0,
        2.0,
    ]
    with pytest.raises(ValueError, match="variable dimension"):
        make_array(InputSpec(name="d", datatype="FP32", shape=[-1]), rng)
    assert strip_scheme("grpc://h:1/") == "h:1"
