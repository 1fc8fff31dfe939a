"""The reference server's /metrics text: Triton's counters under the names the benchmark reads."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from mcp_bench.servermetrics.names import TRITON_COUNTERS, TRITON_METRICS
from mcp_refserver.config import RefServerConfig
from mcp_refserver.metrics import ServerMetrics
from mcp_refserver.model import FifoGate
from mcp_refserver.stats import ServerStats


def test_triton_counters_are_rendered_without_a_total_suffix() -> None:
    text = ServerMetrics(RefServerConfig(), ServerStats(), FifoGate(2)).render().decode()
    for name in TRITON_COUNTERS:
        assert f"# TYPE {name} counter\n" in text
        assert f"{name}_total" not in text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    # Every Triton name the benchmark asks for is served, counters as counters.
    for name in TRITON_METRICS:
        assert name in families, name
        assert families[name].type == ("counter" if name in TRITON_COUNTERS else "gauge")
