"""An event loop whose timers fire within tens of microseconds, for a latency model that is exact.

asyncio's default selector on Linux is epoll, and ``epoll_wait`` takes whole milliseconds:
Python rounds every timeout *up* to the next millisecond, so ``asyncio.sleep`` overshoots by
0 to 1 ms (and more on a busy host). ``select()`` takes microseconds. Its limit is that file
descriptors must be below FD_SETSIZE (1024), i.e. about a thousand open connections; use the
default loop (``--loop default``) beyond that.
"""

from __future__ import annotations

import asyncio
import selectors
import signal


def precise_event_loop() -> asyncio.AbstractEventLoop:
    """A selector loop on ``select()`` (microsecond timeouts) instead of epoll (millisecond)."""
    return asyncio.SelectorEventLoop(selectors.SelectSelector())


class PreciseLoopPolicy(asyncio.DefaultEventLoopPolicy):
    """Event loop policy handing out :func:`precise_event_loop` loops (for test runners)."""

    def new_event_loop(self) -> asyncio.AbstractEventLoop:
        return precise_event_loop()


async def until_signalled() -> None:
    """Returns once the process gets SIGINT or SIGTERM: how a server process waits to be stopped."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
