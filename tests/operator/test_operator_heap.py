"""The heap trimmer: free heap goes back to the system, on a schedule that ends with the operator."""

from __future__ import annotations

import asyncio
import gc
import subprocess
import sys
import weakref
from collections.abc import Iterator

import pytest

from mcp_operator import heap
from mcp_operator.settings import OperatorSettings

# a burst's leftovers: 80 MB in objects too large for Python's own small-object pools (so they
# come from malloc), one in a hundred kept, so the heap cannot shrink from its top by itself
BURST = """
import sys
from mcp_operator import heap

def rss_mib():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024

burst = [bytes(800) + i.to_bytes(4, "little") for i in range(100_000)]
kept = burst[::100]
del burst
freed = rss_mib()
trimmed = heap.trim()
print(freed, rss_mib(), trimmed)
"""


def test_trimming_hands_a_bursts_free_heap_back_to_the_system() -> None:
    out = subprocess.run([sys.executable, "-c", BURST], capture_output=True, text=True, check=True).stdout
    freed, after, trimmed = out.split()
    assert trimmed == "True"
    assert float(freed) - float(after) > 40, out  # of the 80 MB freed, most goes back


@pytest.fixture
def thawed() -> Iterator[None]:
    """The trimmer freezes what exists when it starts: this test process gets it back after."""
    yield
    gc.unfreeze()


class _Node:
    """Half of a reference cycle, as kopf's body and its views make."""

    def __init__(self) -> None:
        self.other: _Node | None = None


async def test_cyclic_garbage_is_collected_before_each_trim_and_startup_is_frozen(
    monkeypatch: pytest.MonkeyPatch, thawed: None
) -> None:
    """A handled event's leftovers are cycles that CPython would collect only in a full
    collection it defers while long-lived objects dominate; the trimmer does not wait for it."""
    monkeypatch.setattr(heap, "trim", lambda: True)
    gc.disable()  # only the trimmer collects here
    try:
        trimmer = heap.Trimmer()
        assert trimmer.start(0.05)
        await asyncio.sleep(0)  # the task starts: what exists now is frozen
        assert gc.get_freeze_count() > 0
        first, second = _Node(), _Node()
        first.other, second.other = second, first
        gone = weakref.ref(first)
        del first, second
        assert gone() is not None  # a cycle: no reference count reaches zero
        await asyncio.sleep(0.2)
        await trimmer.close()
        assert gone() is None
    finally:
        gc.enable()


async def test_the_trimmer_trims_on_its_interval_until_closed(
    monkeypatch: pytest.MonkeyPatch, thawed: None
) -> None:
    calls: list[int] = []
    monkeypatch.setattr(heap, "trim", lambda: bool(calls.append(1)))
    trimmer = heap.Trimmer()
    assert trimmer.start(0.01)
    assert not trimmer.start(0.01)  # one task, however often started
    await asyncio.sleep(0.2)
    await trimmer.close()
    ran = len(calls)
    assert ran >= 3
    await asyncio.sleep(0.05)
    assert len(calls) == ran  # closed: no more trims


async def test_an_interval_of_zero_never_trims(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(heap, "trim", lambda: bool(calls.append(1)))
    trimmer = heap.Trimmer()
    assert not trimmer.start(0)
    await asyncio.sleep(0.05)
    await trimmer.close()
    assert calls == []


def test_the_interval_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert OperatorSettings.from_env().heap_trim_seconds == 10.0
    monkeypatch.setenv("MCP_HEAP_TRIM_SECONDS", "0")
    assert OperatorSettings.from_env().heap_trim_seconds == 0.0
    monkeypatch.setenv("MCP_HEAP_TRIM_SECONDS", "-3")
    assert OperatorSettings.from_env().heap_trim_seconds == 0.0
