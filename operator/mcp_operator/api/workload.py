"""What an MCPBenchmark's requests carry: token-length distributions, a shared prefix, a JSONL
dataset, and images (OpenAI chat content parts, V2 image tensors).

Each model maps 1:1 onto the run plan's (``mcp_bench.workload``, ``mcp_bench.multimodal``):
the same fields in camelCase, and :meth:`to_plan` gives the plan's snake_case mapping, which the
plan's own model validates (so the operator and ``mcp-bench`` accept exactly the same thing). The
image models derive from the plan's, whose fields and defaults they share; the API server checks
the cross-field rules itself (CEL), naming the field path.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter, model_validator

from mcp_bench.models import MAX_HISTOGRAM_BINS, DatasetWorkload, Distribution, ImageParts, ImageTensor

from .common import DNS_SUBDOMAIN, SECRET_DATA_KEY, ApiModel, cel, with_rules
from .credentials import no_credentials, rules_extra
from .engine import engine_default, engine_rules
from .ports import port_in_range

DistKind = Literal["fixed", "uniform", "normal", "exponential", "histogram"]
# the parameters each kind takes (the plan's models forbid any other)
DIST_FIELDS: dict[str, tuple[str, ...]] = {
    "fixed": ("value",),
    "uniform": ("low", "high"),
    "normal": ("mean", "std", "min", "max"),
    "exponential": ("mean", "offset"),
    "histogram": ("edges", "weights"),
}
_ALL_PARAMS = ("value", "low", "high", "mean", "std", "min", "max", "offset", "edges", "weights")
_REQUIRED = {
    "fixed": ("value",),
    "uniform": ("low", "high"),
    "normal": ("mean", "std"),
    "exponential": ("mean",),
}
_DIST_ADAPTER: TypeAdapter[Distribution] = TypeAdapter(Distribution)
_BIG = 10_000_000.0
Bounded = Annotated[float, Field(ge=0, le=_BIG)]


def _kind_rules() -> list[dict[str, Any]]:
    """Per kind: the parameters it needs are set and no other kind's are."""
    rules = []
    for kind, allowed in DIST_FIELDS.items():
        required = allowed if kind == "histogram" else _REQUIRED.get(kind, ())
        checks = [f"has(self.{p})" for p in required] + [
            f"!has(self.{p})" for p in _ALL_PARAMS if p not in allowed
        ]
        rules.append(
            cel(
                f"self.kind != '{kind}' || ({' && '.join(checks)})",
                f"kind {kind} needs {', '.join(required)} and takes no parameter but {', '.join(allowed)}",
            )
        )
    return rules


class DistributionSpec(ApiModel):
    """A distribution of lengths, counts or sizes: its kind and that kind's parameters."""

    model_config = with_rules(
        *_kind_rules(),
        cel("!has(self.low) || !has(self.high) || self.low <= self.high", "low must be <= high"),
        cel("!has(self.min) || !has(self.max) || self.min <= self.max", "min must be <= max"),
        cel(
            "!has(self.edges) || !has(self.weights) || size(self.edges) == size(self.weights) + 1",
            "a histogram needs one more edge than weights",
        ),
    )

    kind: DistKind = Field(
        description="fixed, uniform, normal (clamped to min..max), exponential or histogram."
    )
    value: Bounded | None = Field(default=None, description="fixed: the value.")
    low: Bounded | None = Field(default=None, description="uniform: lower bound.")
    high: Bounded | None = Field(default=None, description="uniform: upper bound.")
    mean: Bounded | None = Field(default=None, description="normal, exponential: the mean.")
    std: Bounded | None = Field(default=None, description="normal: standard deviation.")
    min: Bounded | None = Field(default=None, description="normal: lowest value (default 0).")
    max: Bounded | None = Field(default=None, description="normal: highest value.")
    offset: Bounded | None = Field(default=None, description="exponential: added to every draw.")
    edges: list[Bounded] | None = Field(
        default=None,
        description="histogram: bin edges, non-decreasing; bin i spans edges[i]..edges[i+1].",
        min_length=2,
        max_length=MAX_HISTOGRAM_BINS + 1,
    )
    weights: list[Bounded] | None = Field(
        default=None,
        description="histogram: each bin's share (relative), uniform inside the bin.",
        min_length=1,
        max_length=MAX_HISTOGRAM_BINS,
    )

    def to_plan(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)

    @model_validator(mode="after")
    def _as_the_plan(self) -> DistributionSpec:
        _DIST_ADAPTER.validate_python(self.to_plan())
        return self


class ConfigMapFile(ApiModel):
    name: str = Field(
        description="ConfigMap in the benchmark's namespace.", max_length=253, pattern=DNS_SUBDOMAIN
    )
    key: str = Field(description="Key holding the JSONL file.", max_length=253, pattern=SECRET_DATA_KEY)


class VolumeFile(ApiModel):
    claim_name: str = Field(
        description="PersistentVolumeClaim in the benchmark's namespace, mounted read-only.",
        max_length=253,
        pattern=DNS_SUBDOMAIN,
    )
    path: str = Field(
        description="The JSONL file's path inside the volume (relative, no '..').",
        min_length=1,
        max_length=1024,
        pattern=r"^[^/]",
        json_schema_extra={
            "x-kubernetes-validations": [
                cel("!self.matches('(^|/)[.][.](/|$)')", "path must not contain '..'")
            ]
        },
    )

    @model_validator(mode="after")
    def _inside(self) -> VolumeFile:
        if ".." in self.path.split("/"):
            raise ValueError("path must not contain '..'")
        return self


class DatasetSpec(ApiModel):
    """A JSONL file of ``{"prompt": ..., "max_tokens": ...}`` lines, mounted into every shard pod."""

    model_config = with_rules(
        cel(
            "has(self.configMap) != has(self.persistentVolumeClaim)",
            "set exactly one of configMap and persistentVolumeClaim",
        )
    )

    config_map: ConfigMapFile | None = Field(default=None, description="The file as a ConfigMap key.")
    persistent_volume_claim: VolumeFile | None = Field(default=None, description="The file on a volume.")
    default_max_tokens: int = Field(
        default=engine_default(DatasetWorkload, "default_max_tokens"),
        ge=1,
        le=1_000_000,
        description="Output tokens of a line that names none.",
    )

    @model_validator(mode="after")
    def _one_source(self) -> DatasetSpec:
        if (self.config_map is None) == (self.persistent_volume_claim is None):
            raise ValueError("set exactly one of configMap and persistentVolumeClaim")
        return self


class ImagePartsSpec(ImageParts, ApiModel):
    """Images sent as OpenAI chat image_url content parts (backend openai-chat), from a pool
    generated deterministically from the seed. Fields and defaults: ``mcp_bench.multimodal.
    ImageParts``; the distributions are this API's model, absent for the plan's default."""

    model_config = engine_rules(
        cel(
            "(has(self.encoding) && self.encoding == 'url') == has(self.urlBase)",
            "urlBase is set exactly when encoding is url",
        )
    )

    count: DistributionSpec | None = Field(  # type: ignore[assignment]
        default=None, description="Images per request (default 1)."
    )
    width: DistributionSpec | None = Field(default=None, description="Pixels (default 224).")  # type: ignore[assignment]
    height: DistributionSpec | None = Field(default=None, description="Pixels (default 224).")  # type: ignore[assignment]
    url_base: str | None = Field(
        default=None,
        description="encoding url: images are named under it (no credentials: CredentialsInUrl).",
        max_length=2048,
        pattern=r"^https?://",
        json_schema_extra=rules_extra(no_credentials("urlBase"), port_in_range("urlBase")),
    )

    def to_plan(self) -> dict[str, Any]:
        out = self.model_dump(mode="json", exclude_none=True, exclude={"count", "width", "height"})
        for name in ("count", "width", "height"):
            dist = getattr(self, name)
            if dist is not None:
                out[name] = dist.to_plan()
        ImageParts.model_validate(out)
        return out

    @model_validator(mode="after")
    def _as_the_plan(self) -> ImagePartsSpec:
        self.to_plan()
        return self


class ImageTensorSpec(ImageTensor, ApiModel):
    """One V2 (Triton/KServe) input holding a batch of images: [batch, *shape] of datatype.
    Fields and defaults: ``mcp_bench.multimodal.ImageTensor``."""

    model_config = engine_rules()

    def to_plan(self) -> dict[str, Any]:
        return self.model_dump(mode="json")
