"""Triton's statistics extension (``GET /v2/models/{m}/stats``) as counters, and its per-stage means.

Triton keeps, per model and version, cumulative ``count`` and ``ns`` for each stage (success, fail,
queue, compute_input, compute_infer, compute_output, cache_hit, cache_miss) and the inference and
execution counts. They become counters ``triton_stats:<stage>_count`` / ``triton_stats:<stage>_ns``
labelled ``model`` and ``version``, so the generic delta applies; :func:`stage_means` then gives the
mean time per request of each stage over a level (delta ns / delta count).
"""

from __future__ import annotations

from typing import Any

from mcp_bench.observed import COUNTER
from mcp_bench.servermetrics.snapshot import Family, Snapshot, label_key

PREFIX = "triton_stats:"


def _counter(snapshot: Snapshot, name: str, labels: dict[str, str], value: Any) -> None:
    family = snapshot.families.setdefault(PREFIX + name, Family(PREFIX + name, COUNTER))
    family.values[label_key(labels)] = float(value)


def parse_triton_stats(body: Any, snapshot: Snapshot) -> Snapshot:
    """Fill ``snapshot`` from the JSON body; raises ValueError when it is not Triton's shape."""
    if not isinstance(body, dict) or not isinstance(body.get("model_stats"), list):
        raise ValueError("expected a JSON object with a 'model_stats' list")
    for model in body["model_stats"]:
        try:
            labels = {"model": str(model["name"]), "version": str(model.get("version", ""))}
            for name in ("inference_count", "execution_count"):
                if name in model:
                    _counter(snapshot, name, labels, model[name])
            for stage, figures in model.get("inference_stats", {}).items():
                _counter(snapshot, f"{stage}_count", labels, figures["count"])
                _counter(snapshot, f"{stage}_ns", labels, figures["ns"])
        except (KeyError, TypeError) as exc:
            raise ValueError(f"model_stats entry not in Triton's shape: {exc!r}") from exc
    return snapshot


def stage_means(metrics: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per ``model/version`` and stage: delta count, total ms and mean µs, from a delta's ``metrics``."""
    out: dict[str, dict[str, Any]] = {}
    for name, metric in metrics.items():
        if not (name.startswith(PREFIX) and name.endswith("_count")) or metric.get("status") != "ok":
            continue
        stage = name[len(PREFIX) : -len("_count")]
        if stage in ("inference", "execution"):
            continue  # plain counts with no time beside them
        ns_metric = metrics.get(f"{PREFIX}{stage}_ns", {})
        ns_by_labels = {tuple(sorted(s["labels"].items())): s["delta"] for s in ns_metric.get("series", [])}
        for s in metric["series"]:
            key = tuple(sorted(s["labels"].items()))
            count, ns = s["delta"], ns_by_labels.get(key)
            if count is None:
                continue
            model = f"{s['labels'].get('model', '')}/{s['labels'].get('version', '')}"
            out.setdefault(model, {})[stage] = {
                "count": count,
                "total_ms": None if ns is None else ns / 1e6,
                "mean_us": None if ns is None or count <= 0 else ns / count / 1e3,
            }
    return out
