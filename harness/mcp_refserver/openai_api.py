"""OpenAI-compatible endpoints of the reference server (``/v1/completions``, ``/v1/chat/completions``).

Streams look like vLLM's: one SSE ``data:`` event per chunk, a chat stream opens with an
empty-content role delta (so clients must skip empty deltas when timing TTFT), the last
content chunk carries ``finish_reason``, a usage-only chunk follows when
``stream_options.include_usage`` is set, and ``data: [DONE]`` closes the stream.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from aiohttp import web

from mcp_refserver.drift import drift_of, logprobs_asked
from mcp_refserver.media import Seen, chat_content, counts_of
from mcp_refserver.metrics import ServerMetrics
from mcp_refserver.model import Fault, ServedTiming, ServerModel, sleep_until


def _error(status: int, message: str, kind: str = "invalid_request_error") -> web.Response:
    return web.json_response({"error": {"message": message, "type": kind, "code": status}}, status=status)


def _prompt_words(body: dict[str, Any], chat: bool) -> tuple[int, Seen]:
    """Prompt tokens as the server counts them (whitespace-separated words of the text), and the
    images among chat content parts."""
    seen = Seen()
    if chat:
        msgs = body.get("messages")
        if not isinstance(msgs, list) or not msgs:
            raise ValueError("'messages' must be a non-empty list")
        text, seen = chat_content(msgs)
    else:
        prompt = body.get("prompt")
        if isinstance(prompt, list):
            prompt = " ".join(map(str, prompt))
        if not isinstance(prompt, str):
            raise ValueError("'prompt' must be a string or a list of strings")
        text = prompt
    return len(text.split()), seen


def _priority(body: dict[str, Any]) -> int:
    """vLLM's ``priority`` request field (lower is served first); 0 when absent."""
    value = body.get("priority", 0)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError("'priority' must be an integer")
    return value


def _max_tokens(body: dict[str, Any], default: int) -> int:
    value = body.get("max_tokens", body.get("max_completion_tokens"))
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError("'max_tokens' must be a positive integer")
    return value


class OpenAIHandlers:
    def __init__(self, model: ServerModel, metrics: ServerMetrics) -> None:
        self.model = model
        self.metrics = metrics

    def routes(self) -> list[web.RouteDef]:
        return [
            web.post("/v1/completions", self.completions),
            web.post("/v1/chat/completions", self.chat_completions),
            web.get("/v1/models", self.models),
        ]

    async def models(self, request: web.Request) -> web.Response:
        c = self.model.config
        return web.json_response(
            {
                "object": "list",
                "data": [{"id": c.model, "object": "model", "created": 0, "owned_by": c.server_name}],
            }
        )

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._handle(request, chat=False)

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        return await self._handle(request, chat=True)

    async def _handle(self, request: web.Request, chat: bool) -> web.StreamResponse:
        arrival = time.perf_counter_ns()
        arrival_unix = time.time_ns()
        cfg = self.model.config
        try:
            body = await request.json()
            if not isinstance(body, dict):
                raise ValueError("body must be a JSON object")
            if body.get("model") != cfg.model:
                return _error(404, f"The model `{body.get('model')}` does not exist.", "NotFoundError")
            prompt_tokens, images = _prompt_words(body, chat)
            n = _max_tokens(body, cfg.default_max_tokens)
            priority = _priority(body)
        except ValueError as exc:  # includes JSONDecodeError
            return _error(400, str(exc))
        kv = self.model.kv
        if kv is not None and kv.blocks_for(prompt_tokens + n) > kv.usable:
            return _error(400, f"prompt and max_tokens need more than the {kv.usable} usable KV blocks")
        stream = bool(body.get("stream", False))
        opts = body.get("stream_options") or {}
        include_usage = (
            stream and cfg.send_usage and isinstance(opts, dict) and bool(opts.get("include_usage"))
        )
        with_logprobs = logprobs_asked(body, chat)
        drift = drift_of(self.model)
        plan = self.model.plan()
        if plan.fault is Fault.ERROR:
            self.model.stats.record_rejected()
            return _error(cfg.faults.error_status, "injected error", "InternalServerError")
        if plan.fault is Fault.STALL:
            await sleep_until(arrival + round(cfg.faults.stall_s * 1e9))
        self.metrics.prompt_tokens.inc(prompt_tokens)
        counts_of(self.model).record("openai", images)
        image_ns = round(images.images * cfg.image_ms * 1e6)
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": n, "total_tokens": prompt_tokens + n}
        rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        obj = "chat.completion.chunk" if chat else "text_completion"
        created = int(time.time())

        def logprobs(tokens: list[tuple[str, float]]) -> dict[str, Any] | None:
            if not with_logprobs or not tokens:
                return None
            if chat:
                return {"content": [{"token": t, "logprob": v, "top_logprobs": []} for t, v in tokens]}
            return {
                "tokens": [t for t, _ in tokens],
                "token_logprobs": [v for _, v in tokens],
                "top_logprobs": [{t: v} for t, v in tokens],
            }

        def chunk(
            text: str, finish: str | None, role: bool = False, tokens: list[tuple[str, float]] | None = None
        ) -> bytes:
            lp = logprobs(tokens or [])
            if chat:
                delta: dict[str, Any] = {"role": "assistant", "content": text} if role else {"content": text}
                choice: dict[str, Any] = {
                    "index": 0,
                    "delta": delta,
                    "logprobs": lp,
                    "finish_reason": finish,
                }
            else:
                choice = {"index": 0, "text": text, "logprobs": lp, "finish_reason": finish}
            data = {"id": rid, "object": obj, "created": created, "model": cfg.model, "choices": [choice]}
            return b"data: " + json.dumps(data, separators=(",", ":")).encode() + b"\n\n"

        async with self.model.serve(arrival, priority if cfg.priority == "strict" else 0) as svc:
            start = svc.start_ns
            drifting = drift.now(self.model.running + self.model.waiting)
            bucket = cfg.shape_bucket_tokens
            # trap 12: a new prompt-length bucket "compiles" first
            shape = -(-prompt_tokens // bucket) * bucket
            if self.model.shapes.penalty_ns > 0 and await self.model.shapes.ensure(shape):
                start = time.perf_counter_ns()
            held = 0
            try:
                if kv is not None and stream:
                    want = kv.blocks_for(prompt_tokens + 1)
                    waited = await kv.take(want)
                    held = want
                    if waited:
                        start = time.perf_counter_ns()
                first_deadline = start + plan.ttft_ns + image_ns
                last_deadline = first_deadline + (n - 1) * plan.tpot_ns
                if not stream:
                    await self.model.waker.sleep_until(last_deadline)
                    done = time.perf_counter_ns()
                    self._observe(
                        arrival, svc.queue_ns, done, done, plan.tpot_ns, n, arrival_unix_ns=arrival_unix
                    )
                    answer = [(drift.token(i, drifting), drift.logprob(i, drifting)) for i in range(n)]
                    text = "".join(t for t, _ in answer)
                    if chat:
                        choice: dict[str, Any] = {
                            "index": 0,
                            "message": {"role": "assistant", "content": text},
                            "logprobs": logprobs(answer),
                            "finish_reason": "length",
                        }
                    else:
                        choice = {
                            "index": 0,
                            "text": text,
                            "logprobs": logprobs(answer),
                            "finish_reason": "length",
                        }
                    return web.json_response(
                        {
                            "id": rid,
                            "object": "chat.completion" if chat else "text_completion",
                            "created": created,
                            "model": cfg.model,
                            "choices": [choice],
                            "usage": usage,
                        }
                    )
                resp = web.StreamResponse(
                    headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
                )
                await resp.prepare(request)
                if chat:
                    await resp.write(chunk("", None, role=True))
                k = cfg.tokens_per_chunk
                sent = 0
                first_sent = last_sent = 0
                writes: list[int] = []  # each chunk's write instant
                late: list[int] = []  # and how far past its deadline it was written
                while sent < n:
                    if (
                        plan.fault in (Fault.CLOSE, Fault.MALFORMED, Fault.TRUNCATE)
                        and sent >= cfg.faults.fault_after_tokens
                    ):
                        svc.failed = True
                        return await self._fault(request, resp, plan.fault)
                    take = min(k, n - sent)
                    if kv is not None:
                        need = kv.blocks_for(prompt_tokens + sent + take) - held
                        if need > 0 and not kv.try_take(need):
                            # trap 6: no block to be had: preempted, give everything back, wait for
                            # room, recompute the prefix, go on from the next token
                            kv.give_back(held)
                            held = 0
                            kv.preemptions += 1
                            self.metrics.preemptions.inc()
                            want = kv.blocks_for(prompt_tokens + sent + take)
                            await kv.take(want)
                            held = want
                            first_deadline = time.perf_counter_ns() + plan.ttft_ns - sent * plan.tpot_ns
                        elif need > 0:
                            held += need
                    # A chunk leaves when its last token is generated.
                    deadline = first_deadline + (sent + take - 1) * plan.tpot_ns
                    await self.model.waker.sleep_until(deadline)
                    sent += take
                    toks = [
                        (drift.token(i, drifting), drift.logprob(i, drifting))
                        for i in range(sent - take, sent)
                    ]
                    piece = chunk("".join(t for t, _ in toks), "length" if sent == n else None, tokens=toks)
                    # stamped as the bytes are handed to the transport: after the await, the event loop
                    # may have run other requests first, which would make the truth late
                    last_sent = time.perf_counter_ns()
                    first_sent = first_sent or last_sent
                    writes.append(last_sent - arrival)
                    late.append(last_sent - deadline)
                    await resp.write(piece)
            finally:
                if kv is not None and held:
                    kv.give_back(held)
            if include_usage:
                data = {
                    "id": rid,
                    "object": obj,
                    "created": created,
                    "model": cfg.model,
                    "choices": [],
                    "usage": usage,
                }
                await resp.write(b"data: " + json.dumps(data, separators=(",", ":")).encode() + b"\n\n")
            done_sent = time.perf_counter_ns()  # the end a client's e2e measures to
            await resp.write(b"data: [DONE]\n\n")
            self._observe(
                arrival,
                svc.queue_ns,
                first_sent,
                last_sent,
                plan.tpot_ns,
                n,
                arrival_unix_ns=arrival_unix,
                chunk_ns=tuple(writes),
                late_ns=tuple(late),
                done_ns=done_sent - arrival,
            )
            await resp.write_eof()
            return resp

    async def _fault(
        self, request: web.Request, resp: web.StreamResponse, fault: Fault
    ) -> web.StreamResponse:
        if fault is Fault.MALFORMED:
            await resp.write(b'data: {"id": "broken", "choices": [\n\n')
            await resp.write(b"data: [DONE]\n\n")
            await resp.write_eof()
        elif fault is Fault.TRUNCATE:
            await resp.write_eof()  # a clean end of the body, but no [DONE]
        else:  # CLOSE: drop the connection without ending the chunked body
            if request.transport is not None:
                request.transport.abort()
        return resp

    def _observe(
        self,
        arrival: int,
        queue_ns: int,
        first_ns: int,
        end_ns: int,
        tpot_ns: int,
        n: int,
        *,
        arrival_unix_ns: int,
        chunk_ns: tuple[int, ...] = (),
        late_ns: tuple[int, ...] = (),
        done_ns: int = 0,
    ) -> None:
        """Record what the server actually did (write instants, not planned deadlines)."""
        m = self.metrics
        ttft, e2e = first_ns - arrival, end_ns - arrival
        m.ttft.observe(ttft / 1e9)
        m.e2e.observe(e2e / 1e9)
        if n > 1:
            m.tpot.observe(tpot_ns / 1e9)
        m.generation_tokens.inc(n)
        self.model.timings.append(
            ServedTiming(
                queue_ns=queue_ns,
                ttft_ns=ttft,
                e2e_ns=e2e,
                output_tokens=n,
                chunk_ns=chunk_ns,
                late_ns=late_ns,
                arrival_unix_ns=arrival_unix_ns,
                done_ns=done_ns,
            )
        )
