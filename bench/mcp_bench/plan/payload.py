"""What each request carries: method and body, prompts and workloads, request classes, shape
sweeps and images."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, TypeAdapter, ValidationError, model_validator

from mcp_bench.multimodal import ImageParts, ImageTensor
from mcp_bench.plan.base import Strict, format_validation_error
from mcp_bench.plan.levels import ClassBackend
from mcp_bench.specmodel import SpecModel
from mcp_bench.workload import Workload

TAG_VALUE = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$"
MAX_CLASSES = 16
MAX_SHAPES = 64


class RequestClass(Strict):
    """A class of requests with its share of the load and its priority; latency is reported per
    class (``LevelResult.breakdown['class']``), so a starved low class is seen, not averaged away."""

    name: str = Field(pattern=TAG_VALUE)
    weight: float = Field(default=1.0, gt=0, description="share of requests, relative to the other classes")
    priority: int | None = Field(
        default=None,
        description="sent as the request's 'priority' field (vLLM's convention: lower is served first); "
        "None sends none",
    )
    latency_p99_ms: float | None = Field(
        default=None, gt=0, description="this class's P99 objective (default: the plan's latency_p99_ms)"
    )
    images: ImageParts | None = Field(
        default=None, description="this class's images (default: the payload's)"
    )
    image_tensor: ImageTensor | None = Field(
        default=None, description="this class's V2 image tensor (default: the payload's)"
    )
    backend: ClassBackend | None = Field(
        default=None,
        description="with the plan's backend 'mix': this class's protocol (required there, only there)",
    )
    path: str | None = Field(
        default=None,
        pattern=r"^/",
        description="with backend 'mix': appended to the plan's url for this class (http: the request path)",
    )
    model: str | None = Field(
        default=None, description="with backend 'mix': this class's model (default: the plan's)"
    )


class ShapeSweep(SpecModel):
    """Requests walk through input shapes on purpose, ``repeats`` of each in turn, so the first hit
    of every new shape is measured against the same shape warm (``LevelResult.breakdown['shape']``).
    MCPBenchmark's workload.shapeSweep subclasses it."""

    input_tokens: list[int] = Field(
        min_length=1, max_length=MAX_SHAPES, description="prompt lengths, in order"
    )
    repeats: int = Field(default=8, ge=1, le=100_000, description="Requests of each shape before the next.")

    @model_validator(mode="after")
    def _positive(self) -> ShapeSweep:
        for n in self.input_tokens:
            if n < 1:
                raise ValueError(f"input_tokens must be >= 1, got {n}")
        return self


class Payload(Strict):
    """What each request carries. Plain HTTP uses method/body/headers; LLM backends use the prompt fields."""

    method: Literal["GET", "POST", "PUT"] = "GET"
    body: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    prompt: str = "Hello"
    input_tokens: int = Field(default=0, ge=0)
    max_output_tokens: int = Field(default=16, ge=0)
    stream: bool = True
    workload: dict[str, Any] | None = Field(
        default=None, description="options of a registered workload source (key 'kind' selects it)"
    )
    options: dict[str, Any] = Field(default_factory=dict, description="protocol-specific options")
    fixed_output_tokens: bool = Field(
        default=False,
        description="OpenAI backends: every answer is exactly its max_tokens long; the request also sends "
        "ignore_eos and min_tokens = max_tokens (vLLM's OpenAI server honours both), so an early end of "
        "sequence cannot shorten it",
    )
    classes: list[RequestClass] = Field(
        default_factory=list, max_length=MAX_CLASSES, description="request classes (weights, priorities)"
    )
    shape_sweep: ShapeSweep | None = Field(
        default=None, description="walk through prompt lengths on purpose (first hit per new shape)"
    )
    class_seed: int = Field(default=0, description="seed of the class each request is drawn into")
    images: ImageParts | None = Field(
        default=None, description="openai-chat: images as content parts of every request (or per class)"
    )
    image_tensor: ImageTensor | None = Field(
        default=None, description="triton backends: a V2 image tensor in every request (or per class)"
    )

    @model_validator(mode="after")
    def _distinct_classes(self) -> Payload:
        names = [c.name for c in self.classes]
        if len(set(names)) != len(names):
            raise ValueError(f"classes need distinct names, got {names}")
        if self.shape_sweep is not None and self.workload is not None:
            raise ValueError("give a workload or a shape_sweep, not both")
        if self.workload is not None and self.workload.get("kind") in ("synthetic", "dataset"):
            try:  # the built-in sources are checked here, so a bad one fails before any load
                TypeAdapter(Workload).validate_python(self.workload)
            except ValidationError as exc:
                raise ValueError(f"workload: {format_validation_error(exc)}") from exc
        return self
