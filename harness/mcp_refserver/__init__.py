"""Reference inference server: OpenAI streaming, KServe V2 (HTTP and gRPC) and /metrics with a
known latency model; the ground truth for the benchmark engine's accuracy tests."""

from mcp_refserver.app import RunningServer, build_app, start_refserver
from mcp_refserver.config import Faults, RefServerConfig

__all__ = ["Faults", "RefServerConfig", "RunningServer", "build_app", "start_refserver"]
