"""Output drift under load: a knob that makes the server's answers change when it is busy, as a
server whose batching or reduced-precision kernels under pressure alter its outputs does, so
the consistency probes (``mcp_bench.consistency``) have something real to find.

Off by default: the answers are then a function of the request alone (tokens ``tok0 tok1 ...``,
their logprobs, V2 outputs computed from the input), identical at rest and under load. With
``drift_above_inflight`` N, a request that finds more than N requests in the server (in service
or queued, itself included) drifts: each of its tokens is replaced with probability
``drift_token_share`` (``alt<i>`` for ``tok<i>``), its logprobs and its floating-point V2 outputs
get relative Gaussian noise of ``drift_scale``. The draws are seeded; how many requests drift
depends on the load, which is the point. ``drifted`` counts them.
"""

from __future__ import annotations

import random
import weakref
from typing import Any

import numpy as np

from mcp_refserver.config import RefServerConfig


def logprob_of(index: int) -> float:
    """The logprob of token ``index`` at rest: fixed, so answers can be compared."""
    return -(0.05 + 0.01 * (index % 10))


class Drift:
    def __init__(self, config: RefServerConfig) -> None:
        self.above = config.drift_above_inflight
        self.scale = config.drift_scale
        self.token_share = config.drift_token_share
        self._rng = random.Random(config.seed + 3)
        self._gen = np.random.default_rng(config.seed + 3)
        self.drifted = 0

    def now(self, in_server: int) -> bool:
        """Whether a request that sees ``in_server`` requests (itself included) drifts."""
        if self.above is None or in_server <= self.above:
            return False
        self.drifted += 1
        return True

    def token(self, index: int, drifting: bool) -> str:
        if drifting and self.token_share > 0 and self._rng.random() < self.token_share:
            return f" alt{index}"
        return f" tok{index}"

    def logprob(self, index: int, drifting: bool) -> float:
        value = logprob_of(index)
        if drifting and self.scale > 0:
            value *= 1.0 + self._rng.gauss(0.0, self.scale)
        return min(value, 0.0)

    def outputs(self, outputs: dict[str, np.ndarray], drifting: bool) -> dict[str, np.ndarray]:
        """V2 outputs, floating-point ones with relative noise when drifting (integers as they are)."""
        if not drifting or self.scale <= 0:
            return outputs
        out: dict[str, np.ndarray] = {}
        for name, arr in outputs.items():
            if np.issubdtype(arr.dtype, np.floating):
                noise = self._gen.normal(0.0, self.scale, arr.shape)
                arr = (arr * (1.0 + noise)).astype(arr.dtype)
            out[name] = arr
        return out


_DRIFT: weakref.WeakKeyDictionary[Any, Drift] = weakref.WeakKeyDictionary()


def drift_of(model: Any) -> Drift:
    """The drift of one server (its ``ServerModel``), kept beside the model like its media counts."""
    drift = _DRIFT.get(model)
    if drift is None:
        drift = _DRIFT[model] = Drift(model.config)
    return drift


def logprobs_asked(body: dict[str, Any], chat: bool) -> bool:
    """Whether a request asks for logprobs: chat with ``logprobs: true``, completions with a
    number (0 included: the chosen token's own)."""
    value = body.get("logprobs")
    if chat:
        return value is True
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
