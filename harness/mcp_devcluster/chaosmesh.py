"""Chaos Mesh's CustomResourceDefinitions, from the Go module proxy: the module
``github.com/chaos-mesh/chaos-mesh`` carries them (``config/crd/bases``). Only the CRDs can be
had here; Chaos Mesh's controller and daemon run as container images, and there is no container
engine, so an experiment created here is stored and validated by the API server but never
injected (no ``AllInjected`` condition ever comes).

The module has no tagged releases on the proxy; this version is pinned (the chaos-mesh.org/v1alpha1
API of its CRDs is the one Chaos Mesh 2.x serves).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from . import build

MODULE = "github.com/chaos-mesh/chaos-mesh"
VERSION = "v0.9.1-0.20260902003049-47411975a8cb"
CRD_DIR = "config/crd/bases"


def module_dir() -> Path:
    """The module's source, downloaded through the module proxy on first use (then cached)."""
    env = {**os.environ, "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"}
    out = subprocess.run(
        ["go", "mod", "download", "-json", f"{MODULE}@{VERSION}"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        cwd=build.cache_root(),
        timeout=600,
    )
    if out.returncode != 0:
        raise RuntimeError(f"go mod download {MODULE}@{VERSION} failed: {out.stdout}{out.stderr}")
    return Path(json.loads(out.stdout)["Dir"])


def crd_files(plurals: list[str]) -> list[Path]:
    """The CRD manifests of these plurals (``networkchaos``, ``stresschaos``, ``podchaos``, ...)."""
    base = module_dir() / CRD_DIR
    files = [base / f"chaos-mesh.org_{plural}.yaml" for plural in plurals]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise FileNotFoundError(f"not in {MODULE}@{VERSION}: {', '.join(missing)}")
    return files
