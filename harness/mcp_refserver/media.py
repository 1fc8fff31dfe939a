"""Images the reference server receives: OpenAI chat content parts and V2 image tensors.

Why: a multimodal benchmark must be able to prove its images arrived, so the server parses and
counts them (images, decoded bytes, by front end and format) and charges ``image_ms`` per image
in its latency model (before the first token, or inside V2 compute). A data URL that is not
base64 of a PNG or JPEG is a bad request (400), as a real vision server would answer.

V2 rule: an input of rank 4 is a batch of images (``[N, C, H, W]`` or ``[N, H, W, C]``: N
images), one of rank 3 is one image; lower ranks are not images.
"""

from __future__ import annotations

import base64
import binascii
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

_MAGIC = {b"\x89PNG\r\n\x1a\n": "png", b"\xff\xd8\xff": "jpeg"}


class MediaError(ValueError):
    """An image part the server cannot take (answered 400)."""


@dataclass(slots=True)
class Seen:
    """Images of one request."""

    images: int = 0
    bytes: int = 0
    formats: list[str] = field(default_factory=list)


@dataclass(slots=True)
class MediaCounts:
    """Cumulative counts since start, per front end (``openai``, ``v2``)."""

    requests: dict[str, int] = field(default_factory=dict)  # requests that carried images
    images: dict[str, int] = field(default_factory=dict)
    bytes: dict[str, int] = field(default_factory=dict)
    formats: dict[str, int] = field(default_factory=dict)  # png, jpeg, url, tensor

    def record(self, front: str, seen: Seen) -> None:
        if not seen.images:
            return
        self.requests[front] = self.requests.get(front, 0) + 1
        self.images[front] = self.images.get(front, 0) + seen.images
        self.bytes[front] = self.bytes.get(front, 0) + seen.bytes
        for fmt in seen.formats:
            self.formats[fmt] = self.formats.get(fmt, 0) + 1

    def as_json(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "images": self.images,
            "bytes": self.bytes,
            "formats": self.formats,
        }


_COUNTS: weakref.WeakKeyDictionary[object, MediaCounts] = weakref.WeakKeyDictionary()


def counts_of(model: object) -> MediaCounts:
    """The counts of one server (its ``ServerModel``): kept beside the model, not in it, so the
    latency model's state stays about timing."""
    counts = _COUNTS.get(model)
    if counts is None:
        counts = _COUNTS[model] = MediaCounts()
    return counts


def _image_url(part: dict[str, Any]) -> str:
    value = part.get("image_url")
    url = value.get("url") if isinstance(value, dict) else value
    if not isinstance(url, str) or not url:
        raise MediaError("an image_url part needs image_url.url")
    return url


def _decode(url: str, seen: Seen) -> None:
    if not url.startswith("data:"):
        if not url.startswith(("http://", "https://")):
            raise MediaError("image_url.url must be a data: URL or an http(s) URL")
        seen.images += 1
        seen.formats.append("url")  # not fetched: counted, no bytes
        return
    head, sep, payload = url.partition(",")
    if not sep or not head.endswith(";base64"):
        raise MediaError("an image data: URL must be base64 (data:image/...;base64,...)")
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise MediaError(f"image data is not base64: {exc}") from exc
    fmt = next((name for magic, name in _MAGIC.items() if data.startswith(magic)), None)
    if fmt is None:
        raise MediaError("image data is neither PNG nor JPEG")
    seen.images += 1
    seen.bytes += len(data)
    seen.formats.append(fmt)


def chat_content(messages: list[Any]) -> tuple[str, Seen]:
    """The text of chat messages (string content, or the text parts of a parts list) and the
    images among their parts."""
    texts: list[str] = []
    seen = Seen()
    for m in messages:
        if not isinstance(m, dict):
            continue
        content = m.get("content", "")
        if not isinstance(content, list):
            texts.append(str(content))
            continue
        for part in content:
            if not isinstance(part, dict):
                raise MediaError("content parts must be objects")
            kind = part.get("type")
            if kind == "text":
                texts.append(str(part.get("text", "")))
            elif kind == "image_url":
                _decode(_image_url(part), seen)
            else:
                raise MediaError(f"content part type {kind!r} not supported (text, image_url)")
    return " ".join(texts), seen


def tensor_images(inputs: dict[str, np.ndarray]) -> Seen:
    """Images among V2 inputs: rank 4 is a batch of images, rank 3 one image."""
    seen = Seen()
    for arr in inputs.values():
        if arr.ndim >= 3:
            n = int(arr.shape[0]) if arr.ndim == 4 else 1
            seen.images += n
            seen.bytes += int(arr.nbytes)
            seen.formats.extend(["tensor"] * n)
    return seen


class MediaCollector(Collector):
    """``mcp_refserver_images_total``, ``..._image_bytes_total`` and ``..._image_requests_total``
    by front end, from the first image on: what a test reads to see that the images arrived."""

    def __init__(self, counts: MediaCounts) -> None:
        self._counts = counts

    def collect(self) -> Iterable[Metric]:
        c = self._counts
        for name, doc, values in (
            ("mcp_refserver_images", "Images received", c.images),
            ("mcp_refserver_image_bytes", "Decoded image bytes received", c.bytes),
            ("mcp_refserver_image_requests", "Requests that carried images", c.requests),
        ):
            if not values:  # none received yet: the default exposition stays as it was
                continue
            family = CounterMetricFamily(name, doc, labels=["front"])
            for front, value in sorted(values.items()):
                family.add_metric([front], value)
            yield family
