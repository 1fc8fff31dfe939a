"""The registry, the finding model and threshold overrides."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_bench.diagnose import DiagnoseInputs, Finding, ThresholdError, all_detectors, diagnose
from mcp_bench.diagnose.catalog import run_detectors
from mcp_bench.diagnose.registry import Detector


def test_every_trap_has_one_detector_and_the_screening_comes_first() -> None:
    ds = all_detectors()
    assert [d.trap for d in ds] == list(range(13))
    assert len({d.key for d in ds}) == 13
    for d in ds:
        assert d.advice and d.needs and d.thresholds, d.key


def test_no_input_is_no_data_everywhere_never_not_found() -> None:
    findings = diagnose(DiagnoseInputs())
    assert [f.trap for f in findings] == list(range(13))
    assert {f.state for f in findings} == {"NoData"}
    for f in findings:
        assert f.needs, f.key  # says what it would need
        assert f.advice and f.name and f.summary


def test_threshold_overrides_by_number_or_key(docs: Any) -> None:
    doc = docs.document(
        [docs.level(server_metrics={"stats": docs.triton_delta(docs.triton_body(100, 4, 1))})]
    )
    default = diagnose(DiagnoseInputs(document=doc))[3]
    assert default.state == "Found" and default.thresholds["queue_share"] == 0.3
    strict = diagnose(DiagnoseInputs(document=doc), ["3.queue_share=0.95"])[3]
    assert strict.state == "NotFound" and strict.thresholds["queue_share"] == 0.95
    by_key = diagnose(DiagnoseInputs(document=doc), ["false-wait.queue_share=0.95"])[3]
    assert by_key.state == "NotFound"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("3.nope=1", "trap 3 has"),
        ("99.x=1", "no detector"),
        ("3.queue_share=high", "not a number"),
        ("queue_share", "TRAP.NAME=VALUE"),
    ],
)
def test_bad_overrides_are_refused(text: str, message: str) -> None:
    with pytest.raises(ThresholdError, match=message):
        diagnose(DiagnoseInputs(), [text])


def test_a_detector_that_raises_says_no_data_and_the_others_still_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import mcp_bench.diagnose.registry as registry

    def broken(d: Detector, inputs: DiagnoseInputs, t: Any) -> Finding:
        raise KeyError("odd data")

    ds = all_detectors()
    patched = {d.trap: d for d in ds}
    patched[3] = Detector(3, "false-wait", ds[3].name, ds[3].advice, ds[3].needs, ds[3].thresholds, broken)
    monkeypatch.setattr(registry, "_DETECTORS", patched)
    findings = run_detectors(DiagnoseInputs())
    assert len(findings) == 13
    assert findings[3].state == "NoData" and "odd data" in findings[3].summary


def test_findings_round_trip_as_json() -> None:
    for f in diagnose(DiagnoseInputs()):
        assert Finding.model_validate_json(f.model_dump_json()) == f
