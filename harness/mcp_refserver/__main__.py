"""``python -m mcp_refserver``: run the reference server until SIGINT/SIGTERM.

Prints the bound HTTP port alone on stdout's first line (so ``--port 0`` is usable from
scripts), and the bound gRPC port on the second line when ``--grpc-port`` is given.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from pydantic import ValidationError

from mcp_refserver.app import start_refserver
from mcp_refserver.config import Faults, RefServerConfig
from mcp_refserver.loop import precise_event_loop, until_signalled


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m mcp_refserver",
        description="Reference inference server with a known latency model "
        "(OpenAI streaming, V2 HTTP/gRPC, /metrics).",
        epilog="Delays take '50', 'uniform:20:80', 'normal:50:5[:min[:max]]' or 'exponential:mean[:offset]'.",
    )
    a = p.add_argument
    a("--host", default="127.0.0.1")
    a("--port", type=int, default=8000, help="HTTP port; 0 picks a free one")
    a("--grpc-port", type=int, default=None, help="V2 gRPC port (0 picks a free one); off when absent")
    a("--model", default="refmodel")
    a("--model-version", default="1")
    a("--server-name", default="mcp-refserver")
    a("--server-version", default="0.1.0")
    a("--config-dir", default=None, help="a mounted ConfigMap: reloaded when its files change, GET /config")
    a("--config-map", default="config", help="that ConfigMap's name (it is part of the content hash)")
    a("--ttft-ms", default="20", help="time to first token once in service")
    a("--tpot-ms", default="5", help="gap between consecutive tokens")
    a("--infer-ms", default="1", help="V2 infer compute time")
    a("--default-max-tokens", type=int, default=16)
    a("--tokens-per-chunk", type=int, default=1)
    a("--no-usage", dest="send_usage", action="store_false", help="never send a usage chunk")
    a("--capacity", type=int, default=0, help="requests in service at once; others queue FIFO (0: no limit)")
    a(
        "--max-inflight",
        type=int,
        default=0,
        help="shed load: a request that finds this many in progress gets 503 at once (0: never)",
    )
    a(
        "--image-ms",
        type=float,
        default=0.0,
        help="per image received (chat image parts, V2 image tensors): before the first token or in compute",
    )
    a(
        "--gpu-memory-per-request-bytes",
        type=int,
        default=0,
        help="simulated GPU memory each request in service holds (the memory forensics' peak)",
    )
    a(
        "--leak-bytes-per-request",
        type=int,
        default=0,
        help="memory every finished request keeps: simulated GPU memory, and held for real (resident set)",
    )
    a("--seed", type=int, default=0)
    a(
        "--loop",
        choices=("select", "default"),
        default="select",
        help="'select': microsecond timers, under ~1000 connections; 'default': epoll, millisecond timers",
    )
    for field in Faults.model_fields:
        a(f"--{field.replace('_', '-')}", dest=f"fault_{field}", default=None)
    traps = p.add_argument_group("trap knobs (mcp-bench diagnose; all off by default)")
    t = traps.add_argument
    t("--batch-max-size", type=int, default=1, help="trap 3: V2 dynamic batcher's batch size (1: off)")
    t("--batch-delay-ms", type=float, default=0.0, help="trap 3: how long a batch waits to fill")
    t("--kv-blocks", type=int, default=0, help="trap 6: paged KV cache of this many blocks (0: off)")
    t("--kv-block-tokens", type=int, default=16, help="trap 6: tokens per KV block")
    t("--kv-fragmentation", type=float, default=0.0, help="trap 6: share of the cache no allocation can use")
    t("--priority", choices=("fifo", "strict"), default="fifo", help="trap 8: strict priority queueing")
    t("--instances", type=int, default=1, help="trap 10: model instances, each with --capacity slots")
    t("--instance-weights", default=None, help="trap 10: e.g. 8,1,1,1: requests per instance by weight")
    t("--http-codec-ms", type=float, default=0.0, help="trap 11: V2 HTTP decode+encode time per request")
    t("--grpc-codec-ms", type=float, default=0.0, help="trap 11: V2 gRPC decode+encode time per request")
    t("--shape-penalty-ms", type=float, default=0.0, help="trap 12: first request of a new shape pays this")
    t("--shape-bucket-tokens", type=int, default=1, help="trap 12: prompt lengths round up to this bucket")
    t(
        "--drift-above-inflight",
        type=int,
        default=None,
        help="output drift: a request finding more than N requests in the server gets changed answers",
    )
    t("--drift-scale", type=float, default=None, help="output drift: relative noise on logprobs, V2 floats")
    t("--drift-token-share", type=float, default=None, help="output drift: share of tokens replaced")
    return p


TRAP_FIELDS = (
    "batch_max_size",
    "batch_delay_ms",
    "kv_blocks",
    "kv_block_tokens",
    "kv_fragmentation",
    "priority",
    "instances",
    "instance_weights",
    "http_codec_ms",
    "grpc_codec_ms",
    "shape_penalty_ms",
    "shape_bucket_tokens",
    "drift_above_inflight",
    "drift_scale",
    "drift_token_share",
)


def config_from_args(args: argparse.Namespace) -> RefServerConfig:
    """Raises pydantic's ValidationError (with the field path) on bad values."""
    faults = {
        k[len("fault_") :]: v for k, v in vars(args).items() if k.startswith("fault_") and v is not None
    }
    return RefServerConfig.model_validate(
        {
            "host": args.host,
            "port": args.port,
            "grpc_port": args.grpc_port,
            "model": args.model,
            "model_version": args.model_version,
            "server_name": args.server_name,
            "server_version": args.server_version,
            "config_dir": args.config_dir,
            "config_map": args.config_map,
            "ttft_ms": args.ttft_ms,
            "tpot_ms": args.tpot_ms,
            "infer_ms": args.infer_ms,
            "default_max_tokens": args.default_max_tokens,
            "tokens_per_chunk": args.tokens_per_chunk,
            "send_usage": args.send_usage,
            "capacity": args.capacity,
            "max_inflight": args.max_inflight,
            "image_ms": args.image_ms,
            "gpu_memory_per_request_bytes": args.gpu_memory_per_request_bytes,
            "leak_bytes_per_request": args.leak_bytes_per_request,
            "seed": args.seed,
            "faults": faults,
            **{name: getattr(args, name) for name in TRAP_FIELDS if getattr(args, name) is not None},
        }
    )


async def _serve(config: RefServerConfig) -> None:
    server = await start_refserver(config)
    print(server.port, flush=True)
    if server.grpc_port is not None:
        print(server.grpc_port, flush=True)
    print(f"refserver listening on {server.url} grpc={server.grpc_url}", file=sys.stderr, flush=True)
    try:
        await until_signalled()
    finally:
        await server.stop()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        config = config_from_args(args)
    except ValidationError as exc:
        print(f"invalid refserver configuration:\n{exc}", file=sys.stderr)
        return 2
    factory = precise_event_loop if args.loop == "select" else None
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(_serve(config))
    return 0


if __name__ == "__main__":
    sys.exit(main())
