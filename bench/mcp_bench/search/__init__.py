"""Saturation search: the highest load that still meets the SLO (max goodput) found by a bounded
search, and the knee of the (load, throughput, latency) curve.

The plan's and the document's shapes live below the plan, in ``mcp_bench.saturation``; ``policy``
and ``knee`` are pure functions, ``driver`` turns them into the levels an engine runs and the
outcome a document records. This package imports no engine: the engines' run loop asks the driver
for its next level.
"""
