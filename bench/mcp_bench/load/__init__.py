"""Load models: closed loop (fixed concurrency) and open loop (pre-computed arrival schedule)."""

from mcp_bench.load.closed import run_closed
from mcp_bench.load.control import LevelControl
from mcp_bench.load.open import run_open
from mcp_bench.load.payloads import payload_source
from mcp_bench.load.schedule import arrival_schedule

__all__ = ["LevelControl", "arrival_schedule", "payload_source", "run_closed", "run_open"]
