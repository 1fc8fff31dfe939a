"""Whether a reference file is independent of the Prometheus it judges. It is not when it is
one of the rules files that Prometheus reports loading (a group's ``file`` in
``/api/v1/rules``): then the rules compared are the rules under test, and a rule edited in that
file, or dropped from it, changes both sides at once. "The same file" is the same file on this
machine (same device and inode), so a symlink (a ConfigMap volume's ``..data``) or another
spelling of the path counts; a relative name is Prometheus's, resolved against its working
directory when Prometheus says which (``/api/v1/status/runtimeinfo``)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path


def _same(a: Path, b: Path) -> bool:
    try:
        return a.samefile(b)
    except OSError:  # not there on this machine, or not readable: not the same file here
        return False


def resolved(name: str, cwd: str | None) -> Path | None:
    """Where a rules file Prometheus names lies, or None for a relative name without its CWD."""
    if os.path.isabs(name):
        return Path(name)
    return Path(cwd, name) if cwd and os.path.isabs(cwd) else None


def needs_cwd(files: Iterable[str]) -> bool:
    return any(name and not os.path.isabs(name) for name in files)


def loaded_file(reference: Path, files: Iterable[str], cwd: str | None) -> str | None:
    """The name under which Prometheus loaded ``reference`` itself, or None."""
    for name in sorted({f for f in files if f}):
        path = resolved(name, cwd)
        if path is not None and _same(reference, path):
            return name
    return None
