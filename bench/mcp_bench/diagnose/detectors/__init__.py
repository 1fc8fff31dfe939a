"""The built-in detectors: importing this package registers every one of them."""

from mcp_bench.diagnose.detectors import (
    false_wait,
    instance_starvation,
    kernel_fusion,
    kv_l2_conflicts,
    nccl_wait,
    paged_fragmentation,
    pipeline_gap,
    precision_breakpoint,
    priority_amplification,
    recompile_avalanche,
    screening,
    serialisation,
    shared_bank_conflicts,
)

__all__ = [
    "false_wait",
    "instance_starvation",
    "kernel_fusion",
    "kv_l2_conflicts",
    "nccl_wait",
    "paged_fragmentation",
    "pipeline_gap",
    "precision_breakpoint",
    "priority_amplification",
    "recompile_avalanche",
    "screening",
    "serialisation",
    "shared_bank_conflicts",
]
