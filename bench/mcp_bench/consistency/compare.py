"""Pure comparisons of one probe's answer under load with its answer at rest, and a level's
counts of them (judged in :mod:`mcp_bench.results.consistency`).

Tokens are compared position by position: a token that differs, and every token one answer has
beyond the other's end, is a mismatch, so a shortened or lengthened answer counts as drift.
Numeric outputs (V2 tensors, OpenAI logprobs) are compared by the L2 distance of their values,
absolute or relative to the at-rest vector's norm; vectors of different shapes cannot be
compared that way and count as unmatched, which is drift too.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from mcp_bench.results.l2spread import L2Spread

L2Kind = Literal["relative", "absolute"]


def token_mismatch(reference: Sequence[str], answer: Sequence[str]) -> tuple[int, int]:
    """(mismatched positions, positions compared): the longer sequence's length is the count of
    positions, so tokens missing from either side are mismatches."""
    positions = max(len(reference), len(answer))
    differ = sum(1 for a, b in zip(reference, answer, strict=False) if a != b)
    return differ + abs(len(reference) - len(answer)), positions


def mismatch_rate(reference: Sequence[str], answer: Sequence[str]) -> float | None:
    """The share of positions whose tokens differ; None when both sequences are empty."""
    differ, positions = token_mismatch(reference, answer)
    return differ / positions if positions else None


def l2_distance(reference: Sequence[float], answer: Sequence[float]) -> float:
    """Euclidean distance of two vectors of the same length (ValueError otherwise)."""
    if len(reference) != len(answer):
        raise ValueError(f"vectors of {len(reference)} and {len(answer)} values")
    return math.sqrt(math.fsum((a - b) * (a - b) for a, b in zip(reference, answer, strict=True)))


def relative_l2(reference: Sequence[float], answer: Sequence[float]) -> float:
    """The L2 distance over the at-rest vector's norm (scale-free, so one threshold fits
    embeddings and logits alike); a zero reference leaves the absolute distance."""
    distance = l2_distance(reference, answer)
    norm = math.sqrt(math.fsum(x * x for x in reference))
    return distance / norm if norm > 0 else distance


def answer_tokens(output: dict[str, Any]) -> list[str] | None:
    """The tokens of an OpenAI answer: the server's own (with logprobs) when given, else the
    text's whitespace-separated words; None for an answer without text (a V2 one)."""
    tokens = output.get("tokens")
    if isinstance(tokens, list):
        return [str(t) for t in tokens]
    text = output.get("text")
    return text.split() if isinstance(text, str) else None


def answer_vector(output: dict[str, Any]) -> tuple[list[float], tuple[Any, ...]] | None:
    """The numeric values of an answer in a fixed order and their layout (what must agree for
    two answers to be compared): V2 tensors by name, or the logprobs of the tokens."""
    tensors = output.get("tensors")
    if isinstance(tensors, dict) and tensors:
        values: list[float] = []
        layout: list[Any] = []
        for name in sorted(tensors):
            values.extend(float(v) for v in tensors[name]["values"])
            layout.append((name, tuple(tensors[name]["shape"])))
        return values, tuple(layout)
    logprobs = output.get("logprobs")
    if isinstance(logprobs, list) and logprobs:
        return [float(v) for v in logprobs], (len(logprobs),)
    return None


@dataclass(frozen=True)
class Comparison:
    """One answer against its probe's at-rest answer."""

    mismatched: int = 0  # token positions that differ
    positions: int = 0  # token positions compared
    l2: float | None = None  # distance of the numeric outputs (of the plan's kind)
    unmatched: bool = False  # numeric outputs of another shape or set: not comparable, drift


def compare_answers(
    reference: dict[str, Any], answer: dict[str, Any], kind: L2Kind = "relative"
) -> Comparison:
    """Compare what a probe answered now with what it answered at rest."""
    mismatched = positions = 0
    ref_tokens, tokens = answer_tokens(reference), answer_tokens(answer)
    if ref_tokens is not None or tokens is not None:
        mismatched, positions = token_mismatch(ref_tokens or [], tokens or [])
    ref_vec, vec = answer_vector(reference), answer_vector(answer)
    if ref_vec is None and vec is None:
        return Comparison(mismatched, positions)
    has_tensors = isinstance(reference.get("tensors"), dict) or isinstance(answer.get("tensors"), dict)
    if ref_vec is None or vec is None or ref_vec[1] != vec[1]:
        # tensors of another shape are drift; logprobs of answers of another length are already
        # counted as token mismatches
        return Comparison(mismatched, positions, None, unmatched=has_tensors)
    measure = relative_l2 if kind == "relative" else l2_distance
    return Comparison(mismatched, positions, measure(ref_vec[0], vec[0]))


def counts(
    comparisons: Iterable[Comparison],
    *,
    probes: int,
    failed: int,
    no_baseline: int = 0,
    unstable: str | None = None,
    error: str | None = None,
) -> dict[str, Any]:
    """The additive part of a level's figures: probes sent, failed, answered without an at-rest
    answer to compare with, answers compared, token positions and mismatches, unmatched shapes,
    the L2 histogram; ``unstable`` says why there is no baseline at all, ``error`` what the first
    probe that failed was told (evidence for a NoData)."""
    spread = L2Spread()
    compared = positions = mismatched = unmatched = 0
    for c in comparisons:
        compared += 1
        positions += c.positions
        mismatched += c.mismatched
        unmatched += int(c.unmatched)
        if c.l2 is not None:
            spread.add(c.l2)
    return {
        "probes": probes,
        "failed": failed,
        "no_baseline": no_baseline,
        "compared": compared,
        "tokens": positions,
        "mismatched_tokens": mismatched,
        "unmatched": unmatched,
        "l2_spread": spread.encode(),
        "unstable": unstable,
        "error": error,
    }
