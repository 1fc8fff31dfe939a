"""Multimodal requests: generated images are valid and deterministic, pools are drawn from by
count, content parts and V2 tensors reach the request, and plans refuse a backend that cannot
carry them."""

from __future__ import annotations

import base64
import io
import itertools
import json
import random

import numpy as np
import pytest

from mcp_bench.load.payloads import CLASS_TAG, payload_source
from mcp_bench.multimodal import ImageParts, ImageTensor, image_pool, jpeg_bytes, png_bytes, tensor_pool
from mcp_bench.plan import PlanError, RunPlan
from mcp_bench.protocols.openai_stream import OpenAIRequest
from mcp_bench.records import RequestPayload
from mcp_bench.workload import FixedDist, UniformDist

Image = pytest.importorskip("PIL.Image")  # the plot extra brings Pillow; the engine does not need it


@pytest.mark.parametrize(("w", "h"), [(1, 1), (13, 7), (224, 224), (333, 65)])
def test_png_decodes_to_the_pixels_written(w: int, h: int) -> None:
    data = png_bytes(w, h, random.Random(7))
    img = Image.open(io.BytesIO(data))
    assert img.size == (w, h) and img.mode == "RGB"
    assert img.tobytes() == random.Random(7).randbytes(w * h * 3)


@pytest.mark.parametrize(("w", "h"), [(1, 1), (16, 8), (50, 31)])
def test_jpeg_decodes_to_flat_blocks_of_the_seeded_levels(w: int, h: int) -> None:
    data = jpeg_bytes(w, h, random.Random(3))
    img = Image.open(io.BytesIO(data))
    assert img.size == (w, h) and img.mode == "L"
    pixels = np.asarray(img, dtype=int)
    rng = random.Random(3)
    for by in range(-(-h // 8)):
        for bx in range(-(-w // 8)):
            level = rng.randrange(256)
            block = pixels[by * 8 : by * 8 + 8, bx * 8 : bx * 8 + 8]
            assert np.all(np.abs(block - level) <= 1)  # a flat block, the decoder's rounding only


def test_pool_is_deterministic_per_seed_and_sizes_follow_the_distributions() -> None:
    spec = ImageParts(width=UniformDist(low=32, high=96), height=FixedDist(value=40), pool_size=8, seed=5)
    a, b = image_pool(spec), image_pool(spec)
    assert [p.part for p in a] == [p.part for p in b]
    assert image_pool(spec.model_copy(update={"seed": 6}))[0].part != a[0].part
    assert {p.height for p in a} == {40}
    assert all(32 <= p.width <= 96 for p in a) and len({p.width for p in a}) > 1
    url = a[0].part["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    decoded = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
    assert decoded.size == (a[0].width, a[0].height)


def test_url_encoding_names_images_under_the_base() -> None:
    spec = ImageParts(format="jpeg", encoding="url", url_base="https://img.example/set/", pool_size=2)
    urls = [p.part["image_url"]["url"] for p in image_pool(spec)]
    assert urls[0].startswith("https://img.example/set/0-0-224x224.jpg")
    with pytest.raises(ValueError, match="url_base"):
        ImageParts(encoding="url")


def test_tensor_pool_shape_type_and_seed() -> None:
    spec = ImageTensor(shape=[3, 8, 8], datatype="FP16", batch=4, pool_size=2, seed=1)
    pool = tensor_pool(spec)
    assert pool[0].array.shape == (4, 3, 8, 8) and pool[0].array.dtype == np.float16
    assert np.array_equal(pool[1].array, tensor_pool(spec)[1].array)
    assert not np.array_equal(pool[0].array, pool[1].array)


def _plan(backend: str, payload: dict[str, object]) -> RunPlan:
    return RunPlan.from_dict(
        {
            "url": "http://127.0.0.1:1",
            "backend": backend,
            "model": "m",
            "levels": {"concurrency": [1]},
            "stage": {"requests": 1},
            "payload": payload,
        }
    )


def test_images_per_request_follow_the_count_distribution_and_reach_the_chat_body() -> None:
    plan = _plan(
        "openai-chat",
        {
            "images": {
                "count": {"kind": "uniform", "low": 0, "high": 3},
                "width": 8,
                "height": 8,
                "pool_size": 4,
            }
        },
    )
    got = list(itertools.islice(payload_source(plan), 400))
    counts = [len(p.parts or []) for p in got]
    assert set(counts) == {0, 1, 2, 3}
    body = json.loads(OpenAIRequest("m", chat=True).encode(got[counts.index(2)])[0])
    content = body["messages"][0]["content"]
    assert content[0] == {"type": "text", "text": "Hello"}
    assert [c["type"] for c in content[1:]] == ["image_url", "image_url"]
    again = list(itertools.islice(payload_source(plan), 400))
    assert [p.parts for p in again] == [p.parts for p in got]  # the same run twice


def test_a_class_carries_its_own_images_and_the_others_stay_text() -> None:
    plan = _plan(
        "openai-chat",
        {
            "classes": [
                {"name": "text", "weight": 1},
                {"name": "vision", "weight": 1, "images": {"count": 2, "width": 4, "height": 4}},
            ]
        },
    )
    got = list(itertools.islice(payload_source(plan), 200))
    for p in got:
        assert (p.tags or {})[CLASS_TAG] in ("text", "vision")
        assert (len(p.parts or []) == 2) == (p.tags == {CLASS_TAG: "vision"})
    assert {(p.tags or {})[CLASS_TAG] for p in got} == {"text", "vision"}


def test_plans_refuse_media_their_backend_cannot_carry() -> None:
    with pytest.raises(PlanError, match=r"payload: images .* need backend 'openai-chat'"):
        _plan("openai", {"images": {}})
    with pytest.raises(PlanError, match=r"payload.classes.v: image_tensor needs backend 'triton-http'"):
        _plan("openai-chat", {"classes": [{"name": "v", "image_tensor": {}}]})
    _plan("triton-grpc", {"image_tensor": {"shape": [8, 8, 3]}})


def test_text_only_chat_body_is_unchanged() -> None:
    body = json.loads(OpenAIRequest("m", chat=True).encode(RequestPayload(prompt="hi"))[0])
    assert body["messages"] == [{"role": "user", "content": "hi"}]
