"""The memory forensics' rules on readings whose answer is known."""

from __future__ import annotations

import pytest

from mcp_bench.forensics.memory import MIB, LevelMemory, Tolerance, allocator_fragmentation, assess

GIB = 1024 * MIB


def _level(i: int, before: float, peak: float, after: float | None, load: float = 8) -> LevelMemory:
    return LevelMemory(f"c={load:g}#{i}", load, before, peak, after, 80 * GIB)


def test_memory_a_level_borrows_and_gives_back_is_no_finding() -> None:
    levels = [_level(i, 8 * GIB, 20 * GIB, 8 * GIB + 10 * MIB) for i in range(3)]
    out = assess(levels)
    assert out["state"] == "NotFound" and out["findings"] == []
    row = out["levels"][0]
    assert row["peak_percent"] == pytest.approx(25.0) and row["rise_bytes"] == 12 * GIB
    assert row["returned"] is True and row["retained_bytes"] == 10 * MIB


def test_memory_kept_after_the_settle_wait_is_a_leak_with_its_figures() -> None:
    levels = [_level(0, 8 * GIB, 20 * GIB, 8 * GIB + 2 * GIB)]
    out = assess(levels)
    (leak,) = out["findings"]
    assert out["state"] == "Found" and leak["kind"] == "Leak" and leak["level"] == "c=8#0"
    # allowed: the larger of 64 MiB and 10 % of the 12 GiB borrowed
    assert leak["values"]["retained_bytes"] == 2 * GIB
    assert leak["values"]["allowed_bytes"] == pytest.approx(1.2 * GIB)
    # within the share of the rise it is not
    assert assess([_level(0, 8 * GIB, 20 * GIB, 8 * GIB + GIB)])["state"] == "NotFound"


def test_settled_memory_climbing_over_identical_levels_is_growth() -> None:
    step = 100 * MIB
    levels = [_level(i, 8 * GIB + i * step, 12 * GIB + i * step, None) for i in range(4)]
    out = assess(levels)
    (g,) = out["findings"]  # no settle wait: the next repeat's baseline is the settled figure
    assert g["kind"] == "Growth" and g["values"]["repeats"] == 4
    assert g["values"]["rise_bytes"] == pytest.approx(3 * step)
    assert g["values"]["per_repeat_bytes"] == pytest.approx(step)
    assert out["settled"] is False


def test_growth_needs_three_repeats_of_one_load_and_no_fall_back() -> None:
    step = 100 * MIB
    two = [_level(i, 8 * GIB + i * step, 9 * GIB, None) for i in range(2)]
    assert assess(two)["state"] == "NotFound"
    different_loads = [_level(i, 8 * GIB + i * step, 9 * GIB, None, load=8 * (i + 1)) for i in range(4)]
    assert assess(different_loads)["state"] == "NotFound"
    dipping = [_level(i, v, 9 * GIB, None) for i, v in enumerate((8 * GIB, 7 * GIB, 8.5 * GIB, 9 * GIB))]
    assert assess(dipping)["state"] == "NotFound"


def test_no_readings_is_no_data_never_a_pass() -> None:
    out = assess([LevelMemory("c=8", 8, None, None, None)])
    assert out["state"] == "NoData"


def _segment(total: int, blocks: list[tuple[int, str]]) -> dict[str, object]:
    allocated = sum(size for size, state in blocks if state == "active_allocated")
    return {
        "total_size": total,
        "allocated_size": allocated,
        "blocks": [{"size": size, "state": state} for size, state in blocks],
    }


def test_allocator_with_one_free_block_is_not_fragmented() -> None:
    snap = [_segment(int(2 * GIB), [(int(1.5 * GIB), "active_allocated"), (int(0.5 * GIB), "inactive")])]
    out = allocator_fragmentation(snap)
    assert out["state"] == "NotFound" and out["free_blocks"] == 1 and out["free_entropy"] == 0.0
    assert out["reserved_over_allocated"] == pytest.approx(2 / 1.5)


def test_allocator_free_space_in_many_equal_holes_is_fragmented() -> None:
    hole, used = int(20 * MIB), int(2 * MIB)
    blocks = [b for _ in range(16) for b in ((used, "active_allocated"), (hole, "inactive"))]
    out = allocator_fragmentation({"segments": [_segment(16 * (hole + used), blocks)]})
    assert out["free_blocks"] == 16 and out["free_entropy"] == pytest.approx(1.0)
    assert out["largest_free_bytes"] == hole and out["state"] == "Found"
    assert "16 blocks" in out["summary"]
    # the same holes under the tolerance's byte floor are not worth a finding
    small = allocator_fragmentation(
        [_segment(16 * 3, [b for _ in range(16) for b in ((1, "active_allocated"), (2, "inactive"))])]
    )
    assert small["free_entropy"] == pytest.approx(1.0) and small["reserved_over_allocated"] == 3.0
    assert (
        allocator_fragmentation(
            [_segment(16 * 3, [b for _ in range(16) for b in ((1, "active_allocated"), (2, "inactive"))])],
            Tolerance(reserved_over_allocated=4.0),
        )["state"]
        == "NotFound"
    )
