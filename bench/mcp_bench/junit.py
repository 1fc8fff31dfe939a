"""SLO judgements as JUnit XML, the format CI systems show as test results: one testcase per
objective per level, a failure where it was missed (no data is a failure, as the SLO says), and
one per level for output consistency where the plan probes it (drift or no comparison fails).
A run that declared no SLO is one skipped testcase, so the file never reads as an empty pass.
Standard library only: CI can write it without the ``plot`` extra.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from mcp_bench.results.document import ResultDocument

SUITE = "mcp-bench SLO"


def junit_xml(doc: ResultDocument) -> str:
    """The document's SLO checks as a JUnit ``<testsuites>`` document."""
    suites = ET.Element("testsuites", name=SUITE)
    suite = ET.SubElement(suites, "testsuite", name=SUITE, timestamp=doc.started_at.isoformat())
    tests = failures = skipped = 0
    for level in doc.levels:
        for check in level.slo.checks:
            tests += 1
            case = ET.SubElement(suite, "testcase", classname=level.level_label, name=check.name)
            if not check.passed:
                failures += 1
                actual = "no data" if check.actual is None else f"{check.actual:.6g}"
                message = f"{check.name}: {actual} against {check.target:g} ({check.detail})"
                ET.SubElement(case, "failure", message=message, type="SloMissed").text = message
        c = level.consistency
        if c is not None:  # plan.consistency: outputs under load against those at rest
            tests += 1
            case = ET.SubElement(suite, "testcase", classname=level.level_label, name="output_consistency")
            if c.get("state") != "NotFound":  # drift, or nothing compared: never a pass
                failures += 1
                kind = "OutputDrift" if c.get("state") == "Found" else "NoData"
                message = f"output_consistency {c.get('state')}: {c.get('reason', '')}"
                ET.SubElement(case, "failure", message=message, type=kind).text = message
    if not tests:
        tests = skipped = 1
        case = ET.SubElement(suite, "testcase", classname="run", name="slo")
        ET.SubElement(case, "skipped", message="no SLO declared")
    suite.set("tests", str(tests))
    suite.set("failures", str(failures))
    suite.set("skipped", str(skipped))
    suite.set("errors", "0")
    suites.set("tests", str(tests))
    suites.set("failures", str(failures))
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"
