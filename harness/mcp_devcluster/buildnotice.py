"""One line before a long build, so a cold first run is not minutes of silence: what will be
built and roughly how long it takes, printed only when something is actually missing.

Standard library and ``build`` only: ``make demo`` runs it with the machine's python3 before
the virtual environment exists (``python3 -m mcp_devcluster.buildnotice kubernetes etcd``).
"""

from __future__ import annotations

import sys

from . import build

# what each component's build makes and how long a cold build took on a 2-core machine
# (docs/measurements.md: kubernetes 304-401 s, etcd 72-85 s)
WHAT_AND_HOW_LONG: dict[str, tuple[str, str]] = {
    "kubernetes": ("the API server, controller manager, scheduler and kubectl", "5-7 min"),
    "etcd": ("the cluster's store", "1-1.5 min"),
    "kwok": ("kwok's simulated nodes", "1-2 min"),
}


def missing(names: list[str]) -> list[str]:
    """The components among ``names`` that are not built yet (no stamp in the cache)."""
    table = build.components()
    return [name for name in names if not table[name].is_built()]


def announcement(names: list[str], *, together: bool = False) -> str | None:
    """What building ``names`` will do, or None when every one is built. ``together``: they build
    side by side (``make -j2``), so the longest one sets the wait."""
    todo = missing(names)
    if not todo:
        return None
    parts = []
    for name in todo:
        what, how_long = WHAT_AND_HOW_LONG.get(name, (name, "a few minutes"))
        parts.append(f"{name} ({what}: about {how_long} on 2 cores)")
    side = ", side by side" if together and len(todo) > 1 else ""
    return (
        f"building {'; '.join(parts)}{side} from the Go module proxy into {build.cache_root() / 'bin'}: "
        "once, later runs reuse it"
    )


def main(argv: list[str] | None = None) -> int:
    names = sys.argv[1:] if argv is None else argv
    line = announcement(names, together=True)
    if line:
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
