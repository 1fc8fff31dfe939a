"""Workloads: what each request asks for (prompt, input and output token counts).

Two sources:

* synthetic: prompts of seeded random words whose count follows an input-length distribution
  (fixed, uniform, normal, exponential, or a histogram of observed lengths), the first
  ``shared_prefix_ratio`` of every prompt's words one shared prefix (what a prefix cache reuses),
  and a requested output length (``max_tokens``) drawn from an output-length distribution;
* dataset: a JSONL file, one object per line with ``prompt`` and optional ``max_tokens``.

Images (OpenAI content parts, V2 image tensors) are added per request by
:mod:`mcp_bench.multimodal`, for the whole workload or for one request class.

How tokens are counted. A synthetic prompt has exactly ``input_tokens`` whitespace-separated
words and this module counts one word as one token; that is the number a request *asks* for.
Real tokenizers split words differently, so results prefer the server's ``usage`` field
(``RequestRecord.tokens_from_server``) and fall back to the client's count only when the
server gives none. Dataset prompts are counted the same way (whitespace words).

:class:`Distribution` is also the latency model of the reference server, so one definition
serves both sampling and the "truth" (:meth:`Distribution.quantile`) that accuracy checks use.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterator
from pathlib import Path
from statistics import NormalDist as _Gauss
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from mcp_bench.records import RequestPayload


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FixedDist(_Strict):
    """Always the same value."""

    kind: Literal["fixed"] = "fixed"
    value: float = Field(ge=0)

    def sample(self, rng: random.Random) -> float:
        return self.value

    def quantile(self, q: float) -> float:
        return self.value


class UniformDist(_Strict):
    """Uniform on [low, high]."""

    kind: Literal["uniform"] = "uniform"
    low: float = Field(ge=0)
    high: float = Field(ge=0)

    @model_validator(mode="after")
    def _ordered(self) -> UniformDist:
        if self.high < self.low:
            raise ValueError("high must be >= low")
        return self

    def sample(self, rng: random.Random) -> float:
        return rng.uniform(self.low, self.high)

    def quantile(self, q: float) -> float:
        return self.low + q * (self.high - self.low)


class ClampedNormalDist(_Strict):
    """Normal(mean, std) clamped to [min, max]; clamping keeps lengths and delays sane."""

    kind: Literal["normal"] = "normal"
    mean: float = Field(ge=0)
    std: float = Field(ge=0)
    min: float = Field(default=0.0, ge=0)
    max: float | None = None

    @model_validator(mode="after")
    def _ordered(self) -> ClampedNormalDist:
        if self.max is not None and self.max < self.min:
            raise ValueError("max must be >= min")
        return self

    def _clamp(self, x: float) -> float:
        x = max(self.min, x)
        return x if self.max is None else min(self.max, x)

    def sample(self, rng: random.Random) -> float:
        return self._clamp(rng.gauss(self.mean, self.std))

    def quantile(self, q: float) -> float:
        if self.std == 0:
            return self._clamp(self.mean)
        q = min(max(q, 1e-12), 1 - 1e-12)
        return self._clamp(_Gauss(self.mean, self.std).inv_cdf(q))


class ExponentialDist(_Strict):
    """``offset`` plus an exponential with the given mean: a long right tail."""

    kind: Literal["exponential"] = "exponential"
    mean: float = Field(gt=0)
    offset: float = Field(default=0.0, ge=0)

    def sample(self, rng: random.Random) -> float:
        return self.offset + rng.expovariate(1.0 / self.mean)

    def quantile(self, q: float) -> float:
        return self.offset - self.mean * math.log(1.0 - min(q, 1 - 1e-12))


MAX_HISTOGRAM_BINS = 64


class HistogramDist(_Strict):
    """Lengths as a histogram of what was observed: bin ``i`` spans ``[edges[i], edges[i+1]]`` and
    holds ``weights[i]`` of the mass, uniform inside it (so a production length profile can be
    replayed without its prompts)."""

    kind: Literal["histogram"] = "histogram"
    edges: list[float] = Field(min_length=2, max_length=MAX_HISTOGRAM_BINS + 1)
    weights: list[float] = Field(min_length=1, max_length=MAX_HISTOGRAM_BINS)

    @model_validator(mode="after")
    def _shape(self) -> HistogramDist:
        if len(self.edges) != len(self.weights) + 1:
            raise ValueError("a histogram needs one more edge than weights")
        if any(e < 0 for e in self.edges) or any(
            b < a for a, b in zip(self.edges, self.edges[1:], strict=False)
        ):
            raise ValueError("histogram edges must be >= 0 and non-decreasing")
        if any(w < 0 for w in self.weights) or sum(self.weights) <= 0:
            raise ValueError("histogram weights must be >= 0 with a positive sum")
        return self

    def sample(self, rng: random.Random) -> float:
        i = rng.choices(range(len(self.weights)), self.weights)[0]
        return rng.uniform(self.edges[i], self.edges[i + 1])

    def quantile(self, q: float) -> float:
        total = sum(self.weights)
        target = min(max(q, 0.0), 1.0) * total
        seen = 0.0
        for i, w in enumerate(self.weights):
            if w > 0 and seen + w >= target:
                return self.edges[i] + (target - seen) / w * (self.edges[i + 1] - self.edges[i])
            seen += w
        return self.edges[-1]


Distribution = Annotated[
    FixedDist | UniformDist | ClampedNormalDist | ExponentialDist | HistogramDist,
    Field(discriminator="kind"),
]
_DIST_ADAPTER: TypeAdapter[Distribution] = TypeAdapter(Distribution)


def parse_distribution(text: str | float | dict[str, object]) -> Distribution:
    """Parse ``"50"``, ``"uniform:20:80"``, ``"normal:50:5[:min[:max]]"``, ``"exponential:10[:offset]"``
    or a mapping such as ``{"kind": "fixed", "value": 50}``; raises ``ValueError`` with the reason."""
    if isinstance(text, dict):
        return _DIST_ADAPTER.validate_python(text)
    if isinstance(text, int | float):
        return FixedDist(value=float(text))
    parts = text.strip().split(":")
    try:
        nums = [float(p) for p in parts[1:]] if not _is_number(parts[0]) else [float(parts[0])]
    except ValueError as exc:
        raise ValueError(f"distribution {text!r}: parameters must be numbers") from exc
    kind = "fixed" if _is_number(parts[0]) else parts[0].lower()
    names = {
        "fixed": ["value"],
        "uniform": ["low", "high"],
        "normal": ["mean", "std", "min", "max"],
        "exponential": ["mean", "offset"],
    }
    if kind not in names:
        raise ValueError(f"distribution {text!r}: unknown kind {kind!r} (expected one of {sorted(names)})")
    required = {"fixed": 1, "uniform": 2, "normal": 2, "exponential": 1}[kind]
    if not required <= len(nums) <= len(names[kind]):
        raise ValueError(f"distribution {text!r}: {kind} takes {':'.join(names[kind])}")
    return _DIST_ADAPTER.validate_python({"kind": kind, **dict(zip(names[kind], nums, strict=False))})


def _is_number(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True


# A small fixed vocabulary: every word is one token for common BPE tokenizers, so server
# usage counts stay close to the requested length.
_WORDS = (  # noqa: SIM905 (one string reads better than 90 quoted words)
    "the of and to in is was for on are with as by at be this from or have an they which one you "
    "had not but what all were when we there can more if no out so said use each she how their time "
    "will up other about many then them these some her would make like him into has look two write go "
    "see number way could people than first water been call who oil its now find long down day did get "
    "come made may part"
).split()


class SyntheticWorkload(_Strict):
    """Seeded random-word prompts with input and output lengths drawn from distributions; the first
    ``shared_prefix_ratio`` of each prompt is the same words for every request."""

    kind: Literal["synthetic"] = "synthetic"
    input_tokens: Distribution = FixedDist(value=128)
    output_tokens: Distribution = FixedDist(value=64)
    shared_prefix_ratio: float = Field(
        default=0.0, ge=0, le=1, description="share of each prompt's words that is one prefix common to all"
    )
    seed: int = 0


class DatasetWorkload(_Strict):
    """Prompts from a JSONL file (``{"prompt": ..., "max_tokens": ...}`` per line), cycled in order."""

    kind: Literal["dataset"] = "dataset"
    path: Path
    default_max_tokens: int = Field(default=64, ge=1)


Workload = Annotated[SyntheticWorkload | DatasetWorkload, Field(discriminator="kind")]


class DatasetError(ValueError):
    """A dataset file that cannot be used; the message names the file and line."""


def _synthetic(w: SyntheticWorkload) -> Iterator[RequestPayload]:
    rng = random.Random(w.seed)
    prefix: list[str] = []  # the shared words, grown on demand from a seed of their own
    prefix_rng = random.Random(f"prefix-{w.seed}")
    while True:
        n_in = max(1, round(w.input_tokens.sample(rng)))
        n_out = max(1, round(w.output_tokens.sample(rng)))
        n_shared = round(n_in * w.shared_prefix_ratio)
        if n_shared > len(prefix):
            prefix.extend(prefix_rng.choices(_WORDS, k=n_shared - len(prefix)))
        words = prefix[:n_shared] + rng.choices(_WORDS, k=n_in - n_shared)
        yield RequestPayload(prompt=" ".join(words), input_tokens=n_in, max_output_tokens=n_out)


def load_dataset(w: DatasetWorkload) -> list[RequestPayload]:
    """Read and validate the whole file up front, so a bad line fails before any load is sent."""
    try:
        lines = w.path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise DatasetError(f"{w.path}: cannot read: {exc}") from exc
    out: list[RequestPayload] = []
    for no, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{w.path}:{no}: not JSON: {exc.msg}") from exc
        if not isinstance(obj, dict) or not isinstance(obj.get("prompt"), str):
            raise DatasetError(f"{w.path}:{no}: expected an object with a string 'prompt'")
        max_tokens = obj.get("max_tokens", w.default_max_tokens)
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
            raise DatasetError(f"{w.path}:{no}: 'max_tokens' must be a positive integer")
        prompt = obj["prompt"]
        out.append(
            RequestPayload(prompt=prompt, input_tokens=len(prompt.split()), max_output_tokens=max_tokens)
        )
    if not out:
        raise DatasetError(f"{w.path}: no prompts")
    return out


def payloads(workload: SyntheticWorkload | DatasetWorkload) -> Iterator[RequestPayload]:
    """An endless stream of payloads; the load generator takes as many as it sends."""
    if isinstance(workload, SyntheticWorkload):
        yield from _synthetic(workload)
        return
    items = load_dataset(workload)
    while True:
        for p in items:
            # A fresh object per request: clients may annotate payloads.
            yield RequestPayload(
                prompt=p.prompt, input_tokens=p.input_tokens, max_output_tokens=p.max_output_tokens
            )
