"""Results: histograms, the result document, aggregation, SLO checks and exact shard merging,
with what merging and the views need of the observed sections (GPU telemetry merged, serving GPUs,
server-metric figures, consistency judged)."""

from mcp_bench.results.document import (
    ChecksumMismatchError,
    DocumentFormatError,
    EngineFingerprint,
    LevelResult,
    PercentileTable,
    ResultDocument,
    SloCheck,
    SloVerdict,
    dumps_document,
    loads_document,
)
from mcp_bench.results.histogram import LatencyHistogram
from mcp_bench.results.merge import MergeError, merge_documents

__all__ = [
    "ChecksumMismatchError",
    "DocumentFormatError",
    "EngineFingerprint",
    "LatencyHistogram",
    "LevelResult",
    "MergeError",
    "PercentileTable",
    "ResultDocument",
    "SloCheck",
    "SloVerdict",
    "dumps_document",
    "loads_document",
    "merge_documents",
]
