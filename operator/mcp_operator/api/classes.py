"""spec.workload of an MCPBenchmark: request classes (weights, priorities, a mix's backends),
shape sweeps, synthetic prompts or a dataset, and images; latency is reported per class and shape."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, model_validator

from mcp_bench.models import ClassBackend, RequestClass, ShapeSweep

from .common import ApiModel, cel, with_rules
from .credentials import no_credentials_in_query, rules_extra
from .engine import engine_default, engine_rules
from .workload import DatasetSpec, DistributionSpec, ImagePartsSpec, ImageTensorSpec

MAX_CLASSES = 16
MAX_SHAPES = 64
CLASS_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$"


def class_path_field(description: str) -> Any:
    """A request class's path (a benchmark's and a drill's mix alike): appended to the target's
    URL, its query checked for credentials as the target's path is."""
    return Field(
        default=None,
        max_length=1024,
        pattern=r"^/",
        description=description,
        json_schema_extra=rules_extra(no_credentials_in_query("class path")),
    )


class ClassShare(ApiModel):
    # no docstring: a model's docstring is its schema description, and its subclasses have their own
    # what a benchmark's request class and a drill stage's traffic class both are: a named share
    name: str = Field(description="Class name, reported per class.", max_length=63, pattern=CLASS_NAME)
    weight: float = Field(
        default=engine_default(RequestClass, "weight"),
        gt=0,
        le=1_000_000,
        description="Share of the requests, relative.",
    )


class RequestClassSpec(ClassShare):
    priority: int | None = Field(
        default=None,
        ge=-1_000_000,
        le=1_000_000,
        description="Sent as the request's priority (lower is served first, as vLLM); unset sends none.",
    )
    latency_p99_ms: float | None = Field(
        default=None, gt=0, description="This class's P99 objective (default spec.slo.latencyP99Ms)."
    )
    images: ImagePartsSpec | None = Field(
        default=None, description="This class's images as chat content parts (default: the workload's)."
    )
    image_tensor: ImageTensorSpec | None = Field(
        default=None, description="This class's V2 image tensor (default: the workload's)."
    )
    backend: ClassBackend | None = Field(
        default=None,
        description="With spec.target.backend mix: this class's protocol (required there, and only there).",
    )
    path: str | None = class_path_field(
        "With backend mix: appended to the target's URL for this class (http: the request path)."
    )
    model: str | None = Field(
        default=None,
        max_length=256,
        description="With backend mix: this class's model (default: the target's).",
    )


# Fields and defaults: mcp_bench.plan.ShapeSweep; the API bounds each prompt length in its schema.
class ShapeSweepSpec(ShapeSweep, ApiModel):
    model_config = engine_rules()

    input_tokens: list[Annotated[int, Field(ge=1, le=1_000_000)]] = Field(
        description="Prompt lengths, walked through in order.", min_length=1, max_length=MAX_SHAPES
    )


_SYNTHETIC = "has(self.inputTokens) || has(self.outputTokens) || has(self.sharedPrefixRatio)"


class BenchmarkWorkload(ApiModel):
    """What the requests carry beyond the fixed prompt: synthetic prompts (length distributions, a
    shared prefix) or a JSONL dataset, classes with priorities (latency is reported per class), a
    shape sweep (the first hit of every new shape against the same shape warm), and images."""

    model_config = with_rules(
        cel(
            f"!has(self.dataset) || !({_SYNTHETIC})",
            "a dataset brings its own prompts: no inputTokens, outputTokens or sharedPrefixRatio with it",
        ),
        cel(
            f"!has(self.shapeSweep) || !(has(self.dataset) || {_SYNTHETIC})",
            "a shapeSweep sets the prompts itself: no dataset, inputTokens, outputTokens, sharedPrefixRatio",
        ),
    )

    input_tokens: DistributionSpec | None = Field(
        default=None, description="Synthetic prompts: words (one token each) per prompt."
    )
    output_tokens: DistributionSpec | None = Field(
        default=None,
        description="Synthetic prompts: max_tokens per request (default maxOutputTokens, else 64).",
    )
    shared_prefix_ratio: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="Synthetic prompts: share of each prompt that is one prefix common to all.",
    )
    seed: int | None = Field(default=None, ge=0, le=2**31 - 1, description="Seed of the synthetic prompts.")
    dataset: DatasetSpec | None = Field(
        default=None, description="Prompts from a JSONL file, cycled in order."
    )
    images: ImagePartsSpec | None = Field(
        default=None,
        description="Images as OpenAI chat content parts in every request (backend openai-chat).",
    )
    image_tensor: ImageTensorSpec | None = Field(
        default=None, description="A V2 image tensor in every request (backends triton-http, triton-grpc)."
    )
    classes: list[RequestClassSpec] = Field(
        default_factory=list, description="Request classes.", max_length=MAX_CLASSES
    )
    shape_sweep: ShapeSweepSpec | None = Field(default=None, description="Walk through prompt lengths.")
    max_output_tokens: int | None = Field(
        default=None, ge=1, le=1_000_000, description="Output tokens per request (LLM backends; default 16)."
    )

    @model_validator(mode="after")
    def _one_prompt_source(self) -> BenchmarkWorkload:
        synthetic = any(
            v is not None for v in (self.input_tokens, self.output_tokens, self.shared_prefix_ratio)
        )
        if self.dataset is not None and synthetic:
            raise ValueError(
                "a dataset brings its own prompts: no inputTokens, outputTokens or sharedPrefixRatio"
            )
        if self.shape_sweep is not None and (synthetic or self.dataset is not None):
            raise ValueError("a shapeSweep sets the prompts itself: no dataset, inputTokens, outputTokens")
        return self
