"""spec.workload onto the plan: length distributions (a histogram too), a shared prefix, a
dataset mounted from a ConfigMap or a volume, images per class; the API models refuse what the
plan would, and map 1:1 onto it."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from pydantic import ValidationError

from mcp_bench.load.payloads import CLASS_TAG, payload_source
from mcp_bench.multimodal import ImageParts, ImageTensor
from mcp_bench.plan import PlanError
from mcp_bench.workload import SyntheticWorkload
from mcp_operator.api import MCPBenchmarkSpec
from mcp_operator.api.workload import DistributionSpec, ImagePartsSpec, ImageTensorSpec
from mcp_operator.benchmark.job import job_name, shard_job
from mcp_operator.benchmark.plan import plan_from_spec
from mcp_operator.benchmark.workload import DATASET_DIR

URL = "http://refserver.ml.svc:8000"


def _spec(backend: str = "openai-chat", **workload: Any) -> MCPBenchmarkSpec:
    return MCPBenchmarkSpec.model_validate(
        {
            "target": {"url": URL, "backend": backend, "model": "refmodel"},
            "load": {"concurrency": [4], "requests": 10},
            "workload": workload,
        }
    )


def test_synthetic_lengths_and_shared_prefix_reach_the_plan() -> None:
    spec = _spec(
        inputTokens={"kind": "histogram", "edges": [10, 20, 200], "weights": [9, 1]},
        outputTokens={"kind": "uniform", "low": 4, "high": 8},
        sharedPrefixRatio=0.25,
        seed=3,
    )
    plan = plan_from_spec(spec, URL, "b")
    assert plan.payload.workload == {
        "kind": "synthetic",
        "input_tokens": {"kind": "histogram", "edges": [10.0, 20.0, 200.0], "weights": [9.0, 1.0]},
        "output_tokens": {"kind": "uniform", "low": 4.0, "high": 8.0},
        "shared_prefix_ratio": 0.25,
        "seed": 3,
    }
    SyntheticWorkload.model_validate(plan.payload.workload)  # the engine's own model takes it
    got = list(itertools.islice(payload_source(plan), 50))
    assert all(10 <= p.input_tokens <= 200 and 4 <= p.max_output_tokens <= 8 for p in got)


def test_max_output_tokens_is_the_synthetic_output_when_no_distribution_is_given() -> None:
    plan = plan_from_spec(_spec(inputTokens={"kind": "fixed", "value": 5}, maxOutputTokens=7), URL, "b")
    assert plan.payload.workload is not None
    assert plan.payload.workload["output_tokens"] == {"kind": "fixed", "value": 7}


def test_images_per_class_map_one_to_one_and_are_sent_per_class() -> None:
    images = {
        "count": {"kind": "uniform", "low": 1, "high": 3},
        "width": {"kind": "fixed", "value": 16},
        "height": {"kind": "normal", "mean": 12, "std": 2, "min": 8, "max": 16},
        "format": "jpeg",
        "poolSize": 4,
        "seed": 9,
    }
    spec = _spec(
        classes=[
            {"name": "text", "weight": 1},
            {"name": "vision", "weight": 1, "priority": 1, "images": images},
        ]
    )
    plan = plan_from_spec(spec, URL, "b")
    vision = plan.payload.classes[1]
    assert vision.images == ImageParts.model_validate(
        {
            "count": {"kind": "uniform", "low": 1, "high": 3},
            "width": {"kind": "fixed", "value": 16},
            "height": {"kind": "normal", "mean": 12, "std": 2, "min": 8, "max": 16},
            "format": "jpeg",
            "pool_size": 4,
            "seed": 9,
        }
    )
    got = list(itertools.islice(payload_source(plan), 100))
    by_class = {name: [p for p in got if (p.tags or {})[CLASS_TAG] == name] for name in ("text", "vision")}
    assert by_class["text"] and all(p.parts is None for p in by_class["text"])
    assert by_class["vision"] and all(1 <= len(p.parts or []) <= 3 for p in by_class["vision"])
    url = (by_class["vision"][0].parts or [])[0]["image_url"]["url"]
    assert url.startswith("data:image/jpeg;base64,")


def test_image_tensor_maps_one_to_one() -> None:
    spec = _spec("triton-http", imageTensor={"shape": [224, 224, 3], "datatype": "FP16", "batch": 8})
    plan = plan_from_spec(spec, URL, "b")
    assert plan.payload.image_tensor == ImageTensor(shape=[224, 224, 3], datatype="FP16", batch=8)


def test_every_api_field_is_a_plan_field() -> None:
    """The API models are the plan's in camelCase: no field of one is missing from the other."""
    assert set(ImagePartsSpec.model_fields) == set(ImageParts.model_fields)
    assert set(ImageTensorSpec.model_fields) == set(ImageTensor.model_fields)
    assert set(DistributionSpec.model_fields) >= {
        "kind",
        "value",
        "low",
        "high",
        "mean",
        "std",
        "edges",
        "weights",
    }


def test_a_configmap_dataset_is_mounted_read_only_where_the_plan_reads_it() -> None:
    spec = _spec(
        "openai", dataset={"configMap": {"name": "prompts", "key": "chat.jsonl"}, "defaultMaxTokens": 12}
    )
    plan = plan_from_spec(spec, URL, "b")
    assert plan.payload.workload == {
        "kind": "dataset",
        "path": f"{DATASET_DIR}/dataset.jsonl",
        "default_max_tokens": 12,
    }
    job = shard_job(
        spec=spec, name="b", job=job_name("b", spec), uid="u", command=("x",), default_image="img"
    )
    pod = job["spec"]["template"]["spec"]
    volume = next(v for v in pod["volumes"] if v["name"] == "dataset")
    assert volume["configMap"] == {
        "name": "prompts",
        "items": [{"key": "chat.jsonl", "path": "dataset.jsonl"}],
    }
    mount = next(m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "dataset")
    assert mount == {"name": "dataset", "mountPath": DATASET_DIR, "readOnly": True}


def test_a_volume_dataset_is_a_read_only_claim() -> None:
    spec = _spec("openai", dataset={"persistentVolumeClaim": {"claimName": "data", "path": "sets/a.jsonl"}})
    plan = plan_from_spec(spec, URL, "b")
    assert (
        plan.payload.workload is not None and plan.payload.workload["path"] == f"{DATASET_DIR}/sets/a.jsonl"
    )
    job = shard_job(
        spec=spec, name="b", job=job_name("b", spec), uid="u", command=("x",), default_image="img"
    )
    volume = next(v for v in job["spec"]["template"]["spec"]["volumes"] if v["name"] == "dataset")
    assert volume["persistentVolumeClaim"] == {"claimName": "data", "readOnly": True}


def test_no_dataset_no_volume() -> None:
    spec = _spec("openai", inputTokens={"kind": "fixed", "value": 3})
    job = shard_job(
        spec=spec,
        name="b",
        job=job_name("b", spec),
        uid="u",
        command=("x",),
        default_image="i",
    )
    assert [v["name"] for v in job["spec"]["template"]["spec"]["volumes"]] == ["tmp"]


@pytest.mark.parametrize(
    ("workload", "message"),
    [
        ({"inputTokens": {"kind": "fixed"}}, "value"),
        ({"inputTokens": {"kind": "uniform", "low": 5, "high": 1}}, "high must be >= low"),
        ({"inputTokens": {"kind": "fixed", "value": 1, "low": 0}}, "Extra inputs"),
        ({"inputTokens": {"kind": "histogram", "edges": [0, 1, 2], "weights": [1]}}, "one more edge"),
        ({"dataset": {}}, "exactly one of configMap"),
        ({"dataset": {"persistentVolumeClaim": {"claimName": "d", "path": "a/../b"}}}, "'..'"),
        ({"images": {"encoding": "url"}}, "url_base"),
        ({"imageTensor": {"shape": [3, 0]}}, "greater than or equal to 1"),
        (
            {"dataset": {"configMap": {"name": "c", "key": "k"}}, "sharedPrefixRatio": 0.5},
            "brings its own prompts",
        ),
        ({"shapeSweep": {"inputTokens": [4]}, "inputTokens": {"kind": "fixed", "value": 1}}, "shapeSweep"),
    ],
)
def test_the_api_models_refuse_what_the_plan_would(workload: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        _spec(**workload)


def test_images_on_a_backend_without_content_parts_are_an_invalid_plan() -> None:
    with pytest.raises(PlanError, match=r"images .* need backend 'openai-chat'"):
        plan_from_spec(_spec("openai", images={}), URL, "b")
