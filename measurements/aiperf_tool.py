"""AIPerf (NVIDIA's benchmark client, from PyPI) as the peer in the side-by-side accuracy runs.

Why its own virtual environment: AIPerf pins dozens of packages (pandas, pydantic, aiohttp…) that
must not move this project's; it lives in ``~/.cache/mcp-operator/aiperf-<version>/`` (or under
``MCP_OPERATOR_CACHE``), made on first use and reused. A host without network gets it from
wheels (``wheels``: installed with ``--no-index --no-deps``), optionally on top of the packages
the running interpreter already has (``inherit_site``: a ``.pth`` line per site directory, after
the venv's own, so only what is missing needs a wheel).

AIPerf needs a tokenizer to draw synthetic prompts; a word-level one of our own is made beside
the venv (``w0 … w999``, whitespace split), so nothing is downloaded and the prompt has as many
words as tokens (the reference server counts words).
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

VERSION = "0.13.0"

_TOKENIZER_SCRIPT = """
import json, sys
from pathlib import Path
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
out = Path(sys.argv[1]); out.mkdir(parents=True, exist_ok=True)
words = ["[UNK]"] + [f"w{i}" for i in range(1000)]
tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
tok.decoder = decoders.WordPiece(prefix="##")
tok.save(str(out / "tokenizer.json"))
config = {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]", "model_max_length": 1000000}
(out / "tokenizer_config.json").write_text(json.dumps(config))
"""


def cache_root() -> Path:
    return Path(os.environ.get("MCP_OPERATOR_CACHE", Path.home() / ".cache" / "mcp-operator"))


def venv_dir(version: str = VERSION) -> Path:
    return cache_root() / f"aiperf-{version}"


def python(version: str = VERSION) -> Path:
    """The venv's interpreter; AIPerf runs as ``python -m aiperf`` (either way it was installed)."""
    return venv_dir(version) / "bin" / "python"


def _installed(version: str) -> bool:
    py = python(version)
    if not py.exists():
        return False
    out = subprocess.run(
        [str(py), "-m", "aiperf", "--version"], capture_output=True, text=True, env=_clean_env()
    )
    return out.returncode == 0 and out.stdout.strip().endswith(version)


def _clean_env() -> dict[str, str]:
    """The environment AIPerf runs in: this interpreter's PYTHONPATH would shadow its packages."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def _purelib(py: Path) -> Path:
    cmd = [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
    return Path(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip())


def ensure(version: str = VERSION, wheels: Path | None = None, inherit_site: bool = False) -> Path:
    """The interpreter of the venv holding the pinned AIPerf, installing it on first use.

    From the registry: a venv with pip, ``pip install aiperf==<version>``. From ``wheels`` (no
    network): a venv without pip (the host's Python may lack ensurepip), the wheels put into it by
    this interpreter's pip.
    """
    venv = venv_dir(version)
    if _installed(version):
        return python(version)
    if venv.exists():
        shutil.rmtree(venv)
    make = [sys.executable, "-m", "venv", str(venv)]
    subprocess.run(make if wheels is None else [*make, "--without-pip"], check=True)
    py = python(version)
    target = _purelib(py)
    if inherit_site:
        paths = [*site.getsitepackages(), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
        (target / "_inherited.pth").write_text("".join(f"{os.path.abspath(p)}\n" for p in paths))
    if wheels is not None:
        files = sorted(str(p) for p in wheels.glob("*.whl"))
        pip = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile"]
        subprocess.run([*pip, "--target", str(target), *files], check=True, env=_clean_env())
    else:
        subprocess.run(
            [str(py), "-m", "pip", "install", "-q", f"aiperf=={version}"], check=True, env=_clean_env()
        )
    if not _installed(version):
        probe = subprocess.run([str(py), "-m", "aiperf", "--version"], capture_output=True, text=True)
        raise RuntimeError(f"aiperf {version} did not install into {venv}: {probe.stderr[-2000:]}")
    return py


def tokenizer(version: str = VERSION) -> Path:
    """The word-level tokenizer beside the venv (made once)."""
    path = venv_dir(version) / "tokenizer"
    if not (path / "tokenizer.json").exists():
        subprocess.run(
            [str(python(version)), "-c", _TOKENIZER_SCRIPT, str(path)], check=True, env=_clean_env()
        )
    return path


@dataclass
class AiperfRun:
    """What AIPerf measured for its profiling requests (ms), and when they were sent (unix ns)."""

    ttft: list[float] = field(default_factory=list)
    itl: list[float] = field(default_factory=list)  # every gap between content chunks
    tpot: list[float] = field(default_factory=list)  # per request: (e2e - ttft) / (tokens - 1)
    e2e: list[float] = field(default_factory=list)
    first_start_ns: int = 0
    last_start_ns: int = 0
    failed: int = 0
    summary: dict[str, object] = field(default_factory=dict)


def _value(metrics: dict[str, dict[str, object]], name: str) -> object:
    entry = metrics.get(name)
    return None if entry is None else entry.get("value")


def read_records(path: Path) -> AiperfRun:
    """AIPerf's per-request export (``profile_export.jsonl``) as distributions."""
    run = AiperfRun()
    starts: list[int] = []
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        metrics, meta = rec.get("metrics") or {}, rec.get("metadata") or {}
        ttft, e2e = _value(metrics, "time_to_first_token"), _value(metrics, "request_latency")
        if rec.get("error") or not isinstance(ttft, float | int) or not isinstance(e2e, float | int):
            run.failed += 1
            continue
        run.ttft.append(float(ttft))
        run.e2e.append(float(e2e))
        gaps = _value(metrics, "inter_chunk_latency")
        if isinstance(gaps, list):
            run.itl.extend(float(g) for g in gaps)
        tpot = _value(metrics, "inter_token_latency")
        if isinstance(tpot, float | int):
            run.tpot.append(float(tpot))
        starts.append(int(meta["request_start_ns"]))
    if starts:
        run.first_start_ns, run.last_start_ns = min(starts), max(starts)
    return run


def profile(
    py: Path,
    url: str,
    concurrency: int,
    seconds: float,
    input_tokens: int,
    output_tokens: int,
    artifacts: Path,
    timeout_s: float = 600.0,
) -> AiperfRun:
    """One AIPerf closed-loop run (streaming completions) after ``2 * concurrency`` warm-up requests."""
    if artifacts.exists():
        shutil.rmtree(artifacts)
    cmd = [
        str(py),
        "-m",
        "aiperf",
        "profile",
        "--model",
        "refmodel",
        "--url",
        url,
        "--endpoint-type",
        "completions",
        "--streaming",
        "--concurrency",
        str(concurrency),
        "--benchmark-duration",
        f"{seconds:g}",
        "--warmup-request-count",
        str(2 * concurrency),
        "--isl",
        str(input_tokens),
        "--osl",
        str(output_tokens),
        "--tokenizer",
        str(tokenizer(py.parent.parent.name.removeprefix("aiperf-"))),
        "--use-server-token-count",
        "--random-seed",
        "1",
        "--ui-type",
        "none",
        "--artifact-dir",
        str(artifacts),
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=_clean_env())
    records = artifacts / "profile_export.jsonl"
    if out.returncode != 0 or not records.exists():
        tail = (out.stdout + out.stderr)[-3000:]
        raise RuntimeError(f"aiperf failed (exit {out.returncode}):\n{tail}")
    run = read_records(records)
    summary = artifacts / "profile_export_aiperf.json"
    if summary.exists():
        doc = json.loads(summary.read_text())
        run.summary = {k: doc.get(k) for k in ("request_throughput", "benchmark_duration", "error_summary")}
    return run
