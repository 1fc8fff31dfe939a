"""Client retries around any protocol client: the behaviour of a service's real clients,
reproduced on purpose. Without backoff, every failure comes straight back as another request,
which is how an overload becomes a retry storm; with exponential backoff and jitter the retries
spread out. A request's record spans its first attempt to its last (what the caller waited), and
the client counts every attempt, so the run can say how many requests it really sent."""

from __future__ import annotations

import asyncio
import random

from mcp_bench.plan import Retry
from mcp_bench.records import ErrorKind, ProtocolClient, RequestPayload, RequestRecord

ALWAYS_RETRIED = frozenset({ErrorKind.CONNECT, ErrorKind.DISCONNECTED, ErrorKind.TIMEOUT})


def retryable(record: RequestRecord, policy: Retry) -> bool:
    if record.error is None:
        return False
    if record.error in ALWAYS_RETRIED:
        return True
    return record.error == ErrorKind.HTTP_STATUS and record.status in policy.statuses


def backoff_s(policy: Retry, retry: int, rng: random.Random) -> float:
    """The wait before retry number ``retry`` (0 for the first): exponential, capped, and with
    full jitter a uniform draw below it."""
    ceiling = min(policy.max_backoff_ms, policy.backoff_ms * 2**retry) / 1000
    return rng.uniform(0, ceiling) if policy.jitter else ceiling


class RetryingClient:
    """A protocol client that retries as ``policy`` says; everything else is the inner client's."""

    def __init__(self, inner: ProtocolClient, policy: Retry) -> None:
        self.inner = inner
        self.policy = policy
        self.rng = random.Random(policy.seed)
        self.requests = 0
        self.attempts = 0

    async def open(self) -> None:
        await self.inner.open()

    async def close(self) -> None:
        await self.inner.close()

    async def fingerprint(self) -> dict[str, str]:
        return await self.inner.fingerprint()

    async def send(self, payload: RequestPayload) -> RequestRecord:
        self.requests += 1
        first_sent: int | None = None
        retry = 0
        while True:
            self.attempts += 1
            record = await self.inner.send(payload)
            first_sent = record.sent_ns if first_sent is None else first_sent
            if retry + 1 >= self.policy.attempts or not retryable(record, self.policy):
                break
            wait = backoff_s(self.policy, retry, self.rng)
            if wait > 0:
                await asyncio.sleep(wait)
            retry += 1
        record.sent_ns = first_sent
        return record

    def note(self) -> str:
        """One line for the run's notes: requests, attempts and the policy."""
        p = self.policy
        backoff = "no backoff"
        if p.backoff_ms:
            backoff = f"backoff {p.backoff_ms:g} ms" + (" with jitter" if p.jitter else "")
        return (
            f"retries: {self.attempts} attempts for {self.requests} requests "
            f"(up to {p.attempts} each, {backoff})"
        )


def with_retries(client: ProtocolClient, policy: Retry | None) -> ProtocolClient:
    return client if policy is None or policy.attempts <= 1 else RetryingClient(client, policy)
