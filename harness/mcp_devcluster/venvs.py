"""Virtual environments of third-party servers the tests run beside the project (vLLM), kept out of
the project's own environment so their pins never constrain ours.

Each lives under ``$MCP_OPERATOR_CACHE/venvs/<name>-<version>`` (default ``~/.cache/mcp-operator``),
as the MLServer one of the V2 tests does: created on first use under a file lock (two test
processes never install at once), marked complete only when the install and an import check
succeeded, and reused by later runs, fresh clones and CI on the same machine. The marker records a
digest of the package list, so a changed list reinstalls instead of reusing a stale environment.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


class VenvUnavailable(RuntimeError):
    """The environment could not be created here; the message says why (with pip's own words)."""


@dataclass(frozen=True)
class VenvSpec:
    """What one environment holds: exact requirements installed with ``--no-deps`` (a lock), and a
    Python statement that must run in it afterwards (the import check)."""

    name: str
    version: str
    packages: tuple[str, ...]
    check: str = ""

    def digest(self) -> str:
        return hashlib.sha256("\n".join(self.packages).encode()).hexdigest()[:16]


def cache_root() -> Path:
    return Path(os.environ.get("MCP_OPERATOR_CACHE", "~/.cache/mcp-operator")).expanduser()


def venv_dir(spec: VenvSpec) -> Path:
    return cache_root() / "venvs" / f"{spec.name}-{spec.version}"


def venv_python(spec: VenvSpec) -> Path:
    return venv_dir(spec) / "bin" / "python"


def is_complete(spec: VenvSpec) -> bool:
    marker = venv_dir(spec) / ".complete"
    try:
        return marker.read_text().split()[0] == spec.digest() and venv_python(spec).exists()
    except (OSError, IndexError):
        return False


def _run(argv: Sequence[str], timeout_s: float, what: str) -> None:
    try:
        res = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as exc:
        raise VenvUnavailable(f"{what}: no answer in {timeout_s:.0f}s") from exc
    except OSError as exc:
        raise VenvUnavailable(f"{what}: {exc}") from exc
    if res.returncode != 0:
        raise VenvUnavailable(f"{what} failed ({res.returncode}): {(res.stderr or res.stdout)[-1500:]}")


def ensure_venv(spec: VenvSpec, timeout_s: float = 1800) -> tuple[Path, float]:
    """The environment's Python and the seconds spent installing it (0 when it was cached)."""
    if is_complete(spec):
        return venv_python(spec), 0.0
    venv = venv_dir(spec)
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f".{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if is_complete(spec):
            return venv_python(spec), 0.0
        started = time.monotonic()
        _run([sys.executable, "-m", "venv", "--clear", str(venv)], 300, f"python -m venv {venv}")
        requirements = venv / "requirements.lock"
        requirements.write_text("\n".join(spec.packages) + "\n")
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        _run(
            [*pip, "--no-deps", "-r", str(requirements)],
            timeout_s,
            f"pip install of {spec.name} {spec.version}",
        )
        if spec.check:
            _run([str(venv_python(spec)), "-c", spec.check], 300, f"import check of {spec.name}")
        (venv / ".complete").write_text(f"{spec.digest()} {spec.name}=={spec.version}\n")
        return venv_python(spec), time.monotonic() - started
