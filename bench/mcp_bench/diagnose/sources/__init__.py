"""Readers of the data the detectors judge: the result document's levels (server-metric deltas,
Triton statistics, GPU telemetry, breakdowns), profiler traces and Nsight Compute exports."""
