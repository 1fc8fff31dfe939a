"""Kernel receive timestamps: when response bytes reached this host, not when the client read them.

Why: a client that stamps an arrival when its event loop runs the read is late by the process's
wake-up latency (about 0.1 ms on an idle VM) and by whatever else the loop is busy with (up to
milliseconds on a loaded or shared core), and that lateness lands in TTFT, ITL and e2e. Linux
stamps received packets (``SO_TIMESTAMPNS``, CLOCK_REALTIME); a socket read with ``recvmsg`` gets
the stamp of the last packet it returns, converted here to ``perf_counter_ns``. On loopback the
stamp is taken as the sender's write enters the network stack. A read without a usable stamp
(none given, or a wall-clock step in between) falls back to the time of the read.

:class:`StampedTransport` is the small part of an asyncio transport that the lean HTTP client
uses (``write``, ``abort``, ``is_closing``) over a plain non-blocking socket watched with
``add_reader``; reads go to ``bytes_arrived(data, arrival_ns)`` of its receiver. Over TLS,
:mod:`mcp_bench.protocols.rx_stamps_tls` decrypts the same reads, so HTTPS keeps the stamps.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import sys
from time import perf_counter_ns, time_ns
from typing import Any, Protocol

# The constant is missing from Python's socket module; its value on Linux is 35.
SO_TIMESTAMPNS: int = getattr(socket, "SO_TIMESTAMPNS", 35)
AVAILABLE = sys.platform == "linux" and hasattr(socket.socket, "recvmsg")
_TIMESPEC = struct.Struct("@qq")
_ANC_SIZE = socket.CMSG_SPACE(_TIMESPEC.size) if AVAILABLE else 0
ANCILLARY_SIZE = _ANC_SIZE
_READ_SIZE = 262144
# A kernel stamp older than this (seen from the read) is taken for a clock step, not used.
_MAX_AGE_NS = 10_000_000_000
# A stamp this far after the read is the conversion's error (the clocks are read one after the
# other), taken as the read's time; further after it is a clock step.
_AHEAD_NS = 2_000_000


def wall_minus_perf_ns() -> int:
    """CLOCK_REALTIME minus ``perf_counter_ns``, from the tightest of three readings: one reading
    is off by however long the process was descheduled between the two clocks (milliseconds on a
    busy host), which put stamps after the read that took them."""
    best_gap, offset = None, 0
    for _ in range(3):
        before = perf_counter_ns()
        wall = time_ns()
        after = perf_counter_ns()
        if best_gap is None or after - before < best_gap:
            best_gap, offset = after - before, wall - (before + after) // 2
    return offset


class Receiver(Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None: ...

    def bytes_arrived(self, data: bytes, arrival_ns: int) -> None: ...

    def connection_lost(self, exc: Exception | None) -> None: ...


def kernel_arrival(ancillary: list[tuple[int, int, bytes]], now: int) -> int | None:
    """The kernel's receive stamp among a read's ancillary data, as ``perf_counter_ns``; None when
    there is none or it is implausible (a wall-clock step between the stamp and ``now``)."""
    for level, kind, value in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(value) >= _TIMESPEC.size:
            sec, nsec = _TIMESPEC.unpack_from(value)
            stamp: int = sec * 1_000_000_000 + nsec - wall_minus_perf_ns()
            if -_AHEAD_NS <= now - stamp < _MAX_AGE_NS:
                return min(stamp, now)
    return None


class StampedTransport:
    """A connected TCP socket whose reads carry the kernel's receive time."""

    __slots__ = ("_fd", "_out", "closing", "kernel_reads", "loop", "receiver", "sock")

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket, receiver: Receiver) -> None:
        self.loop = loop
        self.sock = sock
        self.receiver = receiver
        self.closing = False
        self.kernel_reads = 0  # reads whose arrival came from the kernel's stamp
        self._out = bytearray()
        self._fd = sock.fileno()
        receiver.connection_made(self)  # type: ignore[arg-type]
        loop.add_reader(self._fd, self._readable)

    def is_closing(self) -> bool:
        return self.closing

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        """asyncio's transport accessor, for what the pool asks of a connection: its socket."""
        if name == "socket":
            return self.sock
        if name == "peername":
            return self.sock.getpeername()
        return default

    def write(self, data: bytes) -> None:
        if self.closing:
            return
        if self._out:
            self._out += data
            return
        try:
            sent = self.sock.send(data)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError as exc:
            self._lost(exc)
            return
        if sent < len(data):
            self._out += data[sent:]
            self.loop.add_writer(self._fd, self._writable)

    def abort(self) -> None:
        self._lost(None)

    def _writable(self) -> None:
        try:
            sent = self.sock.send(self._out)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._lost(exc)
            return
        del self._out[:sent]
        if not self._out:
            self.loop.remove_writer(self._fd)

    def _readable(self) -> None:
        try:
            data, ancillary, _, _ = self.sock.recvmsg(_READ_SIZE, _ANC_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._lost(exc)
            return
        now = perf_counter_ns()
        if not data:
            self._lost(None)
            return
        stamp = kernel_arrival(ancillary, now)
        if stamp is not None:
            self.kernel_reads += 1
        self._received(data, now if stamp is None else stamp)

    def _received(self, data: bytes, arrival: int) -> None:
        """Bytes read off the socket; a transport that decrypts them overrides this."""
        self.receiver.bytes_arrived(data, arrival)

    def _lost(self, exc: Exception | None) -> None:
        if self.closing:
            return
        self.closing = True
        self.loop.remove_reader(self._fd)
        if self._out:
            self.loop.remove_writer(self._fd)
        self.sock.close()
        self.loop.call_soon(self.receiver.connection_lost, exc)


def keep_enabled() -> socket.socket | None:
    """A socket that only holds receive stamping on; close it when done.

    Linux turns packet stamping on system-wide when the first socket asks, through deferred work,
    so the first answers on a fresh connection could come unstamped (their reads then fall back
    to the time of the read). Opening this before any connection avoids that.
    """
    if not AVAILABLE:
        return None
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError:
        sock.close()
        return None
    return sock


async def open_stamped(
    loop: asyncio.AbstractEventLoop, host: str, port: int, receiver: Receiver
) -> StampedTransport:
    """Connect to ``host:port`` (first address that answers) with kernel receive stamps on."""
    return StampedTransport(loop, await connect_stamped(loop, host, port), receiver)


async def connect_stamped(loop: asyncio.AbstractEventLoop, host: str, port: int) -> socket.socket:
    """A non-blocking TCP socket connected to ``host:port``, asking for receive stamps."""
    last: OSError | None = None
    for family, kind, proto, _, addr in await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            await loop.sock_connect(sock, addr)
        except OSError as exc:
            sock.close()
            last = exc
            continue
        except BaseException:
            sock.close()
            raise
        return sock
    raise last or OSError(f"no address for {host}:{port}")
