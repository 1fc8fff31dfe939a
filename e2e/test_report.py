"""``mcp-operator report``: a finished MCPBenchmark's report ConfigMap rendered as one HTML file
that agrees with the benchmark's status, opened in headless Chromium and its screenshot checked
for the table."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import matplotlib.image
import numpy as np
import pytest

from mcp_bench.results.document import dumps_document, loads_document
from mcp_devcluster import stack

SAMPLE = "mcpbenchmark-refserver.yaml"
CHROMIUM = "chromium-headless-shell"  # Debian's package of the name, from the Makefile's APT_PACKAGES
TABLE_HEADER_RGB = (0xF0, 0xF3, 0xF7)  # the background of the report's table headers


class Tables(HTMLParser):
    """Cell text of every table, by the table's id; and the text of the element with id crc32c."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.crc32c = ""
        self._table = ""
        self._cell: list[str] | None = None
        self._in_crc = False
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "table":
            self._table = a.get("id") or ""
            self.tables[self._table] = []
        elif tag == "tr":
            self.tables[self._table].append([])
        elif tag in ("td", "th"):
            self._cell = []
        self._in_crc = a.get("id") == "crc32c"

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.tables[self._table][-1].append("".join(self._cell).strip())
            self._cell = None
        self._in_crc = False

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        if self._in_crc:
            self.crc32c += data


def _report(kube: Any, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcp_operator.cli", "report", *args, "-n", kube.namespace],
        env={**os.environ, "KUBECONFIG": str(kube.kubeconfig)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_report_of_a_finished_benchmark_agrees_with_its_status_and_renders(
    kube: Any, refserver: str, sample: Any, tmp_path: Path
) -> None:
    missing = _report(kube, "refserver-bench", "-o", str(tmp_path / "none.html"))
    assert missing.returncode == 2 and "no MCPBenchmark" in missing.stderr, missing.stderr  # not applied yet
    kube.apply(sample(SAMPLE, refserver))
    waited = kube.wait("mcpbenchmark/refserver-bench", "condition=Complete", timeout_s=120)
    assert waited.returncode == 0, waited.stderr
    obj = kube.get("mcpbenchmark", "refserver-bench")
    apart = stack.passed_or_flagged_apart(obj)  # a busy host may start one shard late: flagged
    status = obj["status"]
    html, junit = tmp_path / "report.html", tmp_path / "junit.xml"
    done = _report(kube, "refserver-bench", "-o", str(html), "--junit", str(junit))
    assert done.returncode == 0, done.stderr

    page = Tables(html.read_text())
    header, *rows = page.tables["levels"]
    assert header[:4] == ["Level", "P50 ms", "P95 ms", "P99 ms"]
    assert [(r[0], r[1], r[2], r[3], r[6], r[7], r[-1]) for r in rows] == [
        (s["level"], s["p50Ms"], s["p95Ms"], s["p99Ms"], str(s["requests"]), str(s["errors"]), s["slo"])
        for s in status["results"]
    ]
    cluster = dict(map(tuple, page.tables["benchmark"][1:]))  # the status, as a section of its own
    assert cluster["phase"] == "Succeeded" and cluster["shards reported"] == "2"
    assert cluster["shards rejected"] == "0"
    conditions = {r[0]: r[1] for r in page.tables["conditions"][1:]}
    assert conditions == {c["type"]: c["status"] for c in status["conditions"]}
    assert conditions["Ready"] == ("False" if apart else "True")
    merged = loads_document(kube.get("configmap", status["reportName"])["data"]["result.json"])
    assert page.crc32c == merged.crc32c
    suite = ET.parse(junit).getroot()
    assert suite.get("tests") == str(len(rows)) and suite.get("failures") == "0"  # one P99 SLO per level
    agreed = f"signed with the run's key; its figures match status.results, {len(rows)} level(s)"
    assert f"report: {agreed}" in done.stdout
    assert cluster["report verified"] == agreed

    # rewritten after the operator signed it (completed changed, the checksum recomputed): refused
    merged.levels[0].completed *= 10
    forged = dumps_document(merged)  # a valid CRC-32C, no signature of the run's key
    kube.run(
        "patch", "configmap", status["reportName"], "--type=merge",
        "-p", json.dumps({"data": {"result.json": forged}}),
    )  # fmt: skip
    refused = _report(kube, "refserver-bench", "-o", str(tmp_path / "forged.html"))
    assert refused.returncode == 3 and "does not verify" in refused.stderr, refused.stderr  # not verified
    assert not (tmp_path / "forged.html").exists()
    # re-signed with the run's key, as a Secret reader could: refused, for disagreeing with the
    # status that only the operator writes (issue 35, item 4), naming the figure and both values
    key = base64.b64decode(kube.get("secret", f"{status['jobName']}-key")["data"]["hmac-sha256-key"])
    kube.run(
        "patch", "configmap", status["reportName"], "--type=merge",
        "-p", json.dumps({"data": {"result.json": dumps_document(merged, key)}}),
    )  # fmt: skip
    resigned = _report(kube, "refserver-bench", "-o", str(tmp_path / "resigned.html"))
    row = status["results"][0]  # the level whose count was multiplied
    assert resigned.returncode == 3 and "disagrees with the MCPBenchmark's status.results" in resigned.stderr
    assert f"requests: {row['requests'] * 10} in the report, {row['requests']} in status" in resigned.stderr
    assert not (tmp_path / "resigned.html").exists()

    binary = shutil.which(CHROMIUM)
    if binary is None:
        pytest.skip(f"{CHROMIUM} is not installed (make system-packages installs it)")
    shot = tmp_path / "report.png"
    flags = ["--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1280,1600"]
    subprocess.run(
        [binary, *flags, f"--screenshot={shot}", html.as_uri()],
        capture_output=True,
        timeout=60,
        check=True,
    )
    pixels = np.round(matplotlib.image.imread(shot)[..., :3] * 255).astype(int)
    assert pixels.shape[:2] == (1600, 1280)
    assert pixels.std() > 20  # not one colour
    dark = (pixels.max(axis=2) < 80).mean()
    assert dark > 0.002, dark  # text was drawn
    header_cells = (np.abs(pixels - np.array(TABLE_HEADER_RGB)).max(axis=2) <= 2).sum()
    assert header_cells > 2000, header_cells  # the table's header row is on the screen
