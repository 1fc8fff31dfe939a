"""How a process that lost its Lease leaves: at once, as a crash would (``handlers.common``'s
``still_leading`` and the leadership guard call it). Apart from ``lifecycle`` so that every
handler module can import it without importing what the operator starts and stops."""

from __future__ import annotations

import logging
import os
from typing import NoReturn

from ..readiness import runtime


def abandon(why: str) -> NoReturn:
    """Leadership lost: stop acting at once, as a crash would. Another process may hold the Lease
    already, so nothing is reverted or written here; the successor replays the open journals (the
    crash-point tests prove that path). Child processes (probe workers, drill loads) die first."""
    logging.getLogger(__name__).error("leadership lost (%s): exiting without acting further", why)
    held = runtime.started()
    if held is not None:
        held.kill()
    else:
        runtime.kill_children()
    logging.shutdown()
    os._exit(1)
