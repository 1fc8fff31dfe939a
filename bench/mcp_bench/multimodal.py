"""Multimodal requests: images as OpenAI chat content parts, and V2 (Triton/KServe) image tensors.

Why pools: generating an image per request would make the client the bottleneck (and its cost
part of the figures), so each spec pre-generates a small pool once, deterministically from its
seed, and every request draws from it (how many images, and which, from a seeded generator too).
A run is therefore the same bytes on every machine and every shard with the same seed.

Images are written here, without Pillow (not a dependency of the engine): PNG as RGB noise
(incompressible, so its size is that of a photograph, not of a flat colour), JPEG as a baseline
greyscale image of flat 8x8 blocks (one DC coefficient each; valid for any decoder, small).
"""

from __future__ import annotations

import base64
import random
import struct
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from mcp_bench.specmodel import SpecModel
from mcp_bench.workload import Distribution, FixedDist, parse_distribution

if TYPE_CHECKING:
    import numpy as np

MAX_SIDE = 4096
MAX_IMAGES_PER_REQUEST = 32
MAX_POOL = 256
V2_IMAGE_TYPES = ("UINT8", "FP16", "FP32")
ImageFormat = Literal["png", "jpeg"]
ImageEncoding = Literal["base64", "url"]


SEED_MAX = 2**31 - 1  # a seed the CRD's int32 field can hold


class ImageParts(SpecModel):
    """Images sent as OpenAI chat ``image_url`` content parts beside the prompt's text.
    MCPBenchmark's workload.images subclasses it (``count``, ``width`` and ``height`` take the
    CRD's distribution model there; ``url_base`` adds the credential rules)."""

    count: Distribution = Field(default=FixedDist(value=1), description="images per request (rounded)")
    width: Distribution = Field(default=FixedDist(value=224), description="pixels, per pooled image")
    height: Distribution = Field(default=FixedDist(value=224), description="pixels, per pooled image")
    format: ImageFormat = Field(default="png", description="png (RGB noise) or jpeg (greyscale).")
    encoding: ImageEncoding = Field(
        default="base64", description="base64: a data: URL in the request; url: a link under urlBase."
    )
    url_base: str | None = Field(
        default=None, max_length=2048, description="encoding 'url': images are named under this URL"
    )
    pool_size: int = Field(default=16, ge=1, le=MAX_POOL, description="Distinct images generated.")
    seed: int = Field(default=0, ge=0, le=SEED_MAX, description="Seed of the images and of their draws.")

    @field_validator("count", "width", "height", mode="before")
    @classmethod
    def _shorthand(cls, v: object) -> object:
        """``2``, ``"uniform:1:4"`` as well as a mapping."""
        return parse_distribution(v) if isinstance(v, str | int | float) else v

    @model_validator(mode="after")
    def _url_base(self) -> ImageParts:
        if (self.encoding == "url") != (self.url_base is not None):
            raise ValueError("url_base is given exactly when encoding is 'url'")
        if self.url_base is not None and not self.url_base.startswith(("http://", "https://")):
            raise ValueError("url_base must start with http:// or https://")
        return self


class ImageTensor(SpecModel):
    """One V2 (Triton/KServe) input holding a batch of images: [batch, *shape] of datatype.
    MCPBenchmark's workload.imageTensor is this model with the API server's rules."""

    name: str = Field(default="INPUT0", description="The model's input name.", min_length=1, max_length=256)
    shape: list[Annotated[int, Field(ge=1, le=MAX_SIDE)]] = Field(
        default_factory=lambda: [3, 224, 224],
        description="One image's shape, e.g. [3, 224, 224].",
        min_length=1,
        max_length=4,
    )
    datatype: Literal["UINT8", "FP16", "FP32"] = Field(default="UINT8", description="Element type.")
    batch: int = Field(default=1, ge=1, le=1024, description="Images per request (the leading dimension).")
    pool_size: int = Field(default=4, ge=1, le=MAX_POOL, description="Distinct tensors generated.")
    seed: int = Field(default=0, ge=0, le=SEED_MAX, description="Seed of the tensors and of their draws.")


# --------------------------------------------------------------------------- image encoders


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_bytes(width: int, height: int, rng: random.Random) -> bytes:
    """An 8-bit RGB PNG of seeded noise (each row: filter byte 0, then its pixels)."""
    row = width * 3
    pixels = rng.randbytes(row * height)
    raw = b"".join(b"\x00" + pixels[y * row : (y + 1) * row] for y in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", header)
        + _png_chunk(b"IDAT", zlib.compress(raw, 1))
        + _png_chunk(b"IEND", b"")
    )


# JPEG's standard luminance DC table (Annex K.3): code lengths and the categories they code.
_DC_BITS = (0, 1, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0)
_DC_VALS = tuple(range(12))
# An AC table with one symbol, end of block (every block here has no AC coefficient).
_AC_BITS = (1,) + (0,) * 15
_AC_VALS = (0,)


def _huffman_codes(bits: tuple[int, ...], vals: tuple[int, ...]) -> dict[int, tuple[int, int]]:
    """Canonical Huffman codes (symbol -> (code, length)), as JPEG's DHT segment defines them."""
    codes: dict[int, tuple[int, int]] = {}
    code, k = 0, 0
    for length, n in enumerate(bits, start=1):
        for _ in range(n):
            codes[vals[k]] = (code, length)
            code += 1
            k += 1
        code <<= 1
    return codes


class _BitWriter:
    def __init__(self) -> None:
        self.out = bytearray()
        self.acc = 0
        self.n = 0

    def put(self, value: int, length: int) -> None:
        self.acc = (self.acc << length) | (value & ((1 << length) - 1))
        self.n += length
        while self.n >= 8:
            self.n -= 8
            byte = (self.acc >> self.n) & 0xFF
            self.out.append(byte)
            if byte == 0xFF:
                self.out.append(0)  # byte stuffing inside entropy-coded data
        self.acc &= (1 << self.n) - 1

    def flush(self) -> bytes:
        if self.n:
            self.put((1 << (8 - self.n)) - 1, 8 - self.n)  # pad with one-bits
        return bytes(self.out)


def _segment(marker: int, data: bytes) -> bytes:
    return struct.pack(">HH", marker, len(data) + 2) + data


def jpeg_bytes(width: int, height: int, rng: random.Random) -> bytes:
    """A baseline greyscale JPEG whose 8x8 blocks are flat seeded grey levels."""
    dc_codes, ac_codes = _huffman_codes(_DC_BITS, _DC_VALS), _huffman_codes(_AC_BITS, _AC_VALS)
    bits = _BitWriter()
    previous = 0
    for _ in range(-(-width // 8) * -(-height // 8)):
        # quantiser 1: the DC coefficient is 8 x (block mean - 128)
        dc = 8 * (rng.randrange(256) - 128)
        diff, previous = dc - previous, dc
        size = abs(diff).bit_length()
        bits.put(*dc_codes[size])
        if size:
            bits.put(diff if diff >= 0 else diff + (1 << size) - 1, size)
        bits.put(*ac_codes[0])  # end of block
    dht = bytes([0x00, *_DC_BITS, *_DC_VALS]) + bytes([0x10, *_AC_BITS, *_AC_VALS])
    return (
        b"\xff\xd8"
        + _segment(0xFFDB, bytes([0]) + bytes([1] * 64))
        + _segment(0xFFC0, struct.pack(">BHHB", 8, height, width, 1) + bytes([1, 0x11, 0]))
        + _segment(0xFFC4, dht)
        + _segment(0xFFDA, bytes([1, 1, 0x00, 0, 63, 0]))
        + bits.flush()
        + b"\xff\xd9"
    )


# --------------------------------------------------------------------------- pools


@dataclass(frozen=True, slots=True)
class PooledImage:
    """One generated image and the content part that carries it."""

    width: int
    height: int
    size: int  # encoded bytes (the image's, before base64)
    part: dict[str, Any]


def _side(dist: Distribution, rng: random.Random) -> int:
    return max(1, min(MAX_SIDE, round(dist.sample(rng))))


def image_pool(spec: ImageParts) -> list[PooledImage]:
    """``pool_size`` images, each its own seeded size and pixels: the same for the same spec."""
    mime = "image/png" if spec.format == "png" else "image/jpeg"
    ext = "png" if spec.format == "png" else "jpg"
    encode = png_bytes if spec.format == "png" else jpeg_bytes
    pool = []
    for i in range(spec.pool_size):
        rng = random.Random(f"image-{spec.seed}-{i}")
        w, h = _side(spec.width, rng), _side(spec.height, rng)
        data = encode(w, h, rng)
        if spec.encoding == "base64":
            url = f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"
        else:
            url = f"{(spec.url_base or '').rstrip('/')}/{spec.seed}-{i}-{w}x{h}.{ext}"
        pool.append(PooledImage(w, h, len(data), {"type": "image_url", "image_url": {"url": url}}))
    return pool


@dataclass(frozen=True, slots=True)
class Tensor:
    """One V2 input ready to send; ``key`` identifies it so clients can cache its encoding."""

    name: str
    datatype: str
    array: np.ndarray
    key: str


def tensor_pool(spec: ImageTensor) -> list[Tensor]:
    """``pool_size`` seeded image batches of the spec's shape and type."""
    import numpy as np

    dtype = {"UINT8": np.uint8, "FP16": np.float16, "FP32": np.float32}[spec.datatype]
    shape = [spec.batch, *spec.shape]
    pool = []
    for i in range(spec.pool_size):
        gen = np.random.default_rng([spec.seed, i])
        if spec.datatype == "UINT8":
            arr = gen.integers(0, 256, shape, dtype=np.uint8)
        else:
            arr = gen.random(shape, dtype=np.float32).astype(dtype)
        pool.append(Tensor(spec.name, spec.datatype, arr, f"{spec.name}-{spec.seed}-{i}"))
    return pool


class MediaSource:
    """Draws each request's images from a pool: how many from ``count``, which ones at random."""

    def __init__(self, images: ImageParts | None, tensor: ImageTensor | None, seed: int) -> None:
        self.images = images
        self.image_pool = image_pool(images) if images is not None else []
        self.tensor_pool = tensor_pool(tensor) if tensor is not None else []
        self.rng = random.Random(f"media-{seed}")

    def parts(self) -> list[dict[str, Any]] | None:
        if self.images is None:
            return None
        n = max(0, min(MAX_IMAGES_PER_REQUEST, round(self.images.count.sample(self.rng))))
        return [self.rng.choice(self.image_pool).part for _ in range(n)]

    def tensors(self) -> list[Tensor] | None:
        if not self.tensor_pool:
            return None
        return [self.rng.choice(self.tensor_pool)]


def media_problem(backend: str, images: ImageParts | None, tensor: ImageTensor | None) -> str | None:
    """Why a backend cannot carry this media, or None: content parts are chat's, tensors V2's."""
    if images is not None and backend != "openai-chat":
        return f"images (content parts) need backend 'openai-chat', not {backend!r}"
    if tensor is not None and backend not in ("triton-http", "triton-grpc"):
        return f"image_tensor needs backend 'triton-http' or 'triton-grpc', not {backend!r}"
    return None
