"""The GPU model server (measurements/gpu_model_server/server.py) with one rank on a CPU: its
OpenAI chat protocol (streamed chunks, usage, image parts), its continuous batching bounded by
--max-batch, its /metrics as mcp-bench parses it, its refusals, the front of trap 10 (--route)
joining two instances' /metrics, and the PNG decoder it falls back on without Pillow. The server
needs PyTorch (see conftest.py for the Python it runs under; skipped, saying so, where none has
it); the decoder and histogram tests need no PyTorch."""

from __future__ import annotations

import asyncio
import base64
import json
import random
import struct
import zlib
from types import ModuleType
from typing import Any

import aiohttp
import pytest

from mcp_bench.multimodal import jpeg_bytes, png_bytes
from mcp_bench.servermetrics.snapshot import Snapshot, parse_prometheus_text

# --------------------------------------------------------------------------- PNG without Pillow


def _png(gms: ModuleType, width: int, height: int, channels: int, filters: list[int], pixels: bytes) -> bytes:
    """A PNG whose rows use the given filter types (encoded here, so the decoder must undo them)."""
    stride = width * channels
    out = bytearray()
    prev = bytes(stride)
    for y in range(height):
        row = pixels[y * stride : (y + 1) * stride]
        f = filters[y % len(filters)]
        enc = bytearray()
        for i in range(stride):
            left = row[i - channels] if i >= channels else 0
            up = prev[i]
            ul = prev[i - channels] if i >= channels else 0
            pred = [0, left, up, (left + up) // 2, gms._paeth(left, up, ul)][f]
            enc.append((row[i] - pred) & 0xFF)
        out += bytes([f]) + enc
        prev = row
    colour = {1: 0, 3: 2, 4: 6}[channels]
    header = struct.pack(">IIBBBBB", width, height, 8, colour, 0, 0, 0)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(bytes(out)))
        + chunk(b"IEND", b"")
    )


@pytest.mark.parametrize("channels", [1, 3, 4])
def test_png_decoder_undoes_every_filter(gms: ModuleType, channels: int) -> None:
    rng = random.Random(channels)
    w, h = 13, 11
    pixels = rng.randbytes(w * h * channels)
    assert gms.decode_png(_png(gms, w, h, channels, [0, 1, 2, 3, 4], pixels)) == (w, h, channels, pixels)


def test_png_decoder_reads_the_benchmarks_images(gms: ModuleType) -> None:
    data = png_bytes(40, 30, random.Random(3))
    w, h, c, pixels = gms.decode_png(data)
    assert (w, h, c) == (40, 30, 3)
    raw = zlib.decompress(data[data.index(b"IDAT") + 4 : data.index(b"IEND") - 8])
    assert pixels == b"".join(raw[y * 121 + 1 : (y + 1) * 121] for y in range(30))


def test_png_decoder_refuses_what_it_cannot_read(gms: ModuleType) -> None:
    with pytest.raises(gms.ImageError):
        gms.decode_png(b"GIF89a....")
    interlaced = bytearray(_png(gms, 2, 2, 3, [0], bytes(12)))
    interlaced[8 + 8 + 12] = 1  # IHDR's interlace byte (its CRC is not checked)
    with pytest.raises(gms.ImageError) as err:
        gms.decode_png(bytes(interlaced))
    assert err.value.status == 415


def test_histogram_is_prometheus_text(gms: ModuleType) -> None:
    h = gms.Histogram("vllm:time_to_first_token_seconds", "ttft", [0.01, 0.1])
    for v in (0.005, 0.05, 0.5, 0.05):
        h.observe(v)
    snap = parse_prometheus_text(h.render('model_name="m"'), Snapshot.now("x", "prometheus_text"))
    fam = snap.families["vllm:time_to_first_token_seconds"]
    assert fam.type == "histogram"
    text = h.render('model_name="m"')
    assert 'le="0.01"} 1' in text and 'le="0.1"} 3' in text and 'le="+Inf"} 4' in text
    assert '_count{model_name="m"} 4' in text


# --------------------------------------------------------------------------- the server on a CPU


@pytest.fixture(scope="module")
def server(serve: Any) -> str:
    url: str = serve(["--device", "cpu", "--preset", "tiny", "--max-batch", "4"])[0]
    return url


def _image_part(data: bytes, kind: str) -> dict[str, Any]:
    url = f"data:image/{kind};base64," + base64.b64encode(data).decode()
    return {"type": "image_url", "image_url": {"url": url}}


async def _stream(session: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> list[Any]:
    """The SSE events of one streamed answer, each parsed ("[DONE]" as is)."""
    async with session.post(url + "/v1/chat/completions", json={**body, "stream": True}) as resp:
        assert resp.status == 200, await resp.text()
        text = (await resp.read()).decode()
    events = [e[len("data: ") :] for e in text.split("\n\n") if e]
    return [e if e == "[DONE]" else json.loads(e) for e in events]


def _chat(words: int, max_tokens: int, images: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    text = {"type": "text", "text": " ".join(f"word{i}" for i in range(words))}
    return {
        "model": "mcp-vlm",
        "messages": [{"role": "user", "content": [text, *(images or [])]}],
        "max_tokens": max_tokens,
        "stream_options": {"include_usage": True},
    }


async def _metrics(session: aiohttp.ClientSession, url: str) -> dict[str, float]:
    async with session.get(url + "/metrics") as resp:
        text = await resp.text()
    parse_prometheus_text(text, Snapshot.now(url, "prometheus_text"))  # mcp-bench reads it
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#") and "_bucket" not in line:
            name, value = line.rsplit(" ", 1)
            out[name.split("{")[0]] = float(value)
    return out


async def test_streamed_chat_with_images(server: str) -> None:
    images = [
        _image_part(png_bytes(40, 30, random.Random(1)), "png"),
        _image_part(jpeg_bytes(48, 32, random.Random(2)), "jpeg"),
    ]
    async with aiohttp.ClientSession() as s:
        events = await _stream(s, server, _chat(5, 6, images))
        again = await _stream(s, server, _chat(5, 6, images))
        info = await (await s.get(server + "/debug/info")).json()
    assert events[-1] == "[DONE]"
    chunks, usage = events[:-2], events[-2]
    assert len(chunks) == 6
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert [c["choices"][0]["finish_reason"] for c in chunks] == [None] * 5 + ["length"]
    assert all(c["object"] == "chat.completion.chunk" and c["model"] == "mcp-vlm" for c in chunks)
    assert usage["choices"] == []
    assert usage["usage"] == {
        "prompt_tokens": 5 + 2 * info["image_tokens"],
        "completion_tokens": 6,
        "total_tokens": 11 + 2 * info["image_tokens"],
    }
    text = [c["choices"][0]["delta"]["content"] for c in chunks]
    assert text == [c["choices"][0]["delta"]["content"] for c in again[:-2]]  # greedy: the same answer


async def test_continuous_batching_bounded_by_max_batch(server: str) -> None:
    async with aiohttp.ClientSession() as s:
        before = await _metrics(s, server)
        answers = await asyncio.gather(*(_stream(s, server, _chat(3 + i, 24)) for i in range(10)))
        after = await _metrics(s, server)
    assert all(len(a) == 24 + 2 for a in answers)
    steps = after["mcp_gpu_model_server_steps_total"] - before["mcp_gpu_model_server_steps_total"]
    tokens = after["vllm:generation_tokens_total"] - before["vllm:generation_tokens_total"]
    assert tokens == 240
    assert steps < tokens / 2  # several sequences in each step, not one after another
    assert 2 <= after["mcp_gpu_model_server_running_peak"] <= 4  # --max-batch 4
    assert after["vllm:request_success_total"] - before["vllm:request_success_total"] == 10
    assert (
        after["vllm:time_to_first_token_seconds_count"] - before["vllm:time_to_first_token_seconds_count"]
        == 10
    )
    assert after["vllm:num_requests_running"] == 0 and after["vllm:num_requests_waiting"] == 0
    assert after["process_resident_memory_bytes"] > 0
    assert "nv_gpu_memory_used_bytes" not in after  # no GPU: no GPU gauge, never a zero


async def test_completions_and_refusals(server: str) -> None:
    async with aiohttp.ClientSession() as s:
        r = await s.post(
            server + "/v1/completions", json={"model": "mcp-vlm", "prompt": "a b c", "max_tokens": 5}
        )
        body = await r.json()
        assert r.status == 200 and len(body["choices"][0]["text"].split()) == 5
        assert body["usage"]["prompt_tokens"] == 3
        bad = [
            _chat(2, 4, [_image_part(b"not an image", "png")]),
            _chat(2, 4, [{"type": "image_url", "image_url": {"url": "http://example.invalid/a.png"}}]),
            _chat(300, 4),  # past the tiny model's 256 positions
            {"model": "mcp-vlm", "messages": [{"role": "user", "content": [{"type": "audio"}]}]},
        ]
        for b in bad:
            r = await s.post(server + "/v1/chat/completions", json=b)
            assert r.status == 400, (b, await r.text())
        snap = await (await s.get(server + "/debug/memory_snapshot")).json()
        assert snap == {"device": "cpu", "segments": []}
        metrics = await _metrics(s, server)
    assert metrics["mcp_gpu_model_server_bad_requests_total"] >= 4


async def test_front_spreads_by_weight_and_joins_the_instances_metrics(serve: Any) -> None:
    """Trap 10's front (--route, --weights 3,1) over two instances that serve one request at a
    time (--max-batch 1, as the traps run them): of each four requests three go to the first; the
    joined /metrics parses as mcp-bench reads it, every instance's series kept apart."""
    instance = ["--device", "cpu", "--preset", "tiny", "--max-batch", "1"]
    first, second = serve([*instance, "--instance", "0"], [*instance, "--instance", "1"])
    (front,) = serve(["--route", f"{first},{second}", "--weights", "3,1"])
    body = {"model": "mcp-vlm", "prompt": "one two three", "max_tokens": 3}
    async with aiohttp.ClientSession() as s:
        for _ in range(4):
            r = await s.post(front + "/v1/completions", json=body)
            assert r.status == 200 and len((await r.json())["choices"][0]["text"].split()) == 3
        streamed = await _stream(s, front, _chat(3, 2))  # the fifth: the first instance again
        models = await (await s.get(front + "/v1/models")).json()
        text = await (await s.get(front + "/metrics")).text()
    assert streamed[-1] == "[DONE]" and models["data"][0]["id"] == "mcp-vlm"
    snap = parse_prometheus_text(text, Snapshot.now(front, "prometheus_text"))

    def by_instance(name: str) -> dict[str, float]:
        return {dict(k)["instance"]: v for k, v in snap.families[name].values.items()}

    assert by_instance("vllm:request_success_total") == {"0": 4.0, "1": 1.0}
    busy = by_instance("mcp_gpu_server_instance_busy_seconds_total")
    assert set(busy) == {"0", "1"} and all(v > 0 for v in busy.values())
    assert text.count("# TYPE vllm:request_success_total ") == 1
