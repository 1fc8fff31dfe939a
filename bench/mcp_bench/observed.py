"""The words the observers write into a result, spelled once for the writers and the readers.

The GPU sampler and the server-metrics probes write them (``telemetry``, ``servermetrics``); the
shard merge, the summaries and the reports read them (``results`` and above), so they sit below
both. Standard library only: the GPU sampler imports this on a machine with nothing but ``pynvml``.
"""

from __future__ import annotations

# the status of an observed section (a GPU telemetry summary, a field of it, a probe's delta):
# figures, or a reason beside another status
STATUS_OK = "ok"
STATUS_UNAVAILABLE = "unavailable"

# the Prometheus metric types of a server-metrics snapshot and of the deltas a result keeps
COUNTER = "counter"
GAUGE = "gauge"
HISTOGRAM = "histogram"
SUMMARY = "summary"
UNKNOWN = "unknown"
