"""JUnit XML of a check run, the report format CI systems show without plugins: one testcase
per check; Fail is a failure, Error and Inconclusive are errors (nothing was verified).

Every testcase has a ``time`` (seconds, the check's own duration; 0 for a row no check was timed
for), and so has the testsuite: the run's wall time where the caller measured it (the checks
run concurrently, so it can be less than the sum), else the sum of its testcases'.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from .verdict import CheckOutcome, Verdict


def _seconds(value: float | None) -> str:
    return f"{max(0.0, value or 0.0):.3f}"


def junit_xml(outcomes: list[CheckOutcome], suite: str = "mcp-check", elapsed_s: float | None = None) -> str:
    failures = sum(1 for o in outcomes if o.outcome == Verdict.FAIL)
    errors = sum(1 for o in outcomes if o.outcome in (Verdict.ERROR, Verdict.INCONCLUSIVE))
    if elapsed_s is None:
        elapsed_s = sum(o.duration_s or 0.0 for o in outcomes)
    root = ET.Element(
        "testsuite",
        name=suite,
        tests=str(len(outcomes)),
        failures=str(failures),
        errors=str(errors),
        time=_seconds(elapsed_s),
    )
    for o in outcomes:
        case = ET.SubElement(root, "testcase", classname=suite, name=o.name, time=_seconds(o.duration_s))
        text = "\n".join(
            [o.message, *(f"{k}={v}" for k, v in o.observed.items())]
            + [f"{f.outcome.value} {f.reason} {f.subject}: {f.observed}" for f in o.findings]
        )
        if o.outcome == Verdict.FAIL:
            ET.SubElement(case, "failure", message=f"{o.reason}: {o.message}", type=o.reason).text = text
        elif o.outcome in (Verdict.ERROR, Verdict.INCONCLUSIVE):
            ET.SubElement(case, "error", message=f"{o.reason}: {o.message}", type=o.outcome.value).text = text
        else:
            ET.SubElement(case, "system-out").text = f"{o.outcome.value} ({o.reason}) {text}"
    return ET.tostring(root, encoding="unicode", xml_declaration=True)


def write_junit(outcomes: list[CheckOutcome], path: Path, elapsed_s: float | None = None) -> None:
    path.write_text(junit_xml(outcomes, elapsed_s=elapsed_s), encoding="utf-8")
