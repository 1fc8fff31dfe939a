"""Prometheus instant vectors as the drift check reads them: label set (``__name__`` left out,
the labels a rule adds applied) -> value. Anything the API does not document is refused."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

Labels = tuple[tuple[str, str], ...]


class MalformedAnswer(ValueError):
    """Prometheus answered, but not with what the API documents."""


def label_key(metric: Mapping[str, str], extra: Iterable[tuple[str, str]] = ()) -> Labels:
    """The join key: every label but ``__name__``, plus the labels a rule adds (they win)."""
    labels = {k: v for k, v in metric.items() if k != "__name__"}
    labels.update(extra)
    return tuple(sorted(labels.items()))


def show(record: str, labels: Labels) -> str:
    return record + "{" + ",".join(f'{k}="{v}"' for k, v in labels) + "}"


def parse_vector(result: Any, what: str, extra: Iterable[tuple[str, str]] = ()) -> dict[Labels, float]:
    """An instant-vector ``data.result`` as label set -> value (``NaN`` and ``±Inf`` kept: the
    comparison decides what they mean); anything else is malformed."""
    if not isinstance(result, list):
        raise MalformedAnswer(f"{what}: expected an instant vector, got {type(result).__name__}")
    extra = tuple(extra)
    out: dict[Labels, float] = {}
    for item in result:
        try:
            metric, (_, text) = item["metric"], item["value"]
            value = float(text)
        except (KeyError, TypeError, ValueError) as exc:
            raise MalformedAnswer(f"{what}: a sample is not {{metric, value: [t, number]}}") from exc
        if not isinstance(metric, Mapping):
            raise MalformedAnswer(f"{what}: a sample's metric is not a label map")
        key = label_key(metric, extra)
        if key in out:
            raise MalformedAnswer(f"{what}: two series share the label set {show('', key)}")
        out[key] = value
    return out
