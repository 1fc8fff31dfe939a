"""Kernel receive stamps under a transport that is not ours: asyncio's own, as aiohttp uses it.

Why: the aiohttp client reads through asyncio's socket transport, which calls the socket's
``recv`` (``recv_into`` under TLS) and hands the bytes to aiohttp's parser; the reading task sees
them a loop turn or more later, merged with whatever else arrived meanwhile. A
:class:`StampingSocket` answers those calls with ``recvmsg`` and keeps each read's kernel stamp.
With a payload attached (aiohttp's ``StreamReader``, whose ``total_bytes`` grows as the parser
feeds it, within the read), every read first notes how many payload bytes had arrived by the
previous read's stamp, so :meth:`StampingSocket.split` can give each byte the arrival of the
read that brought it, however late the task reads them. (Bytes that arrived while the loop did
not read at all come in one read and share its stamp, as on the lean client.)
"""

from __future__ import annotations

import socket
from collections import deque
from time import perf_counter_ns
from typing import Any, Protocol

from mcp_bench.protocols.rx_stamps import ANCILLARY_SIZE, SO_TIMESTAMPNS, kernel_arrival


class Payload(Protocol):
    total_bytes: int


class StampingSocket(socket.socket):
    """A TCP socket whose reads keep the kernel's receive stamp (as ``perf_counter_ns``)."""

    def __init__(self, family: int = socket.AF_INET, type: int = socket.SOCK_STREAM, proto: int = 0) -> None:
        super().__init__(family, type, proto)
        self.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self.last_arrival_ns = 0
        self.kernel_reads = 0
        self.payload: Payload | None = None
        self.marks: deque[tuple[int, int]] = deque()  # (arrival, payload bytes arrived by then)
        self.consumed = 0  # payload bytes handed out by split()

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        data, ancillary, _, _ = self.recvmsg(bufsize, ANCILLARY_SIZE, flags)
        self._note(ancillary)
        return data

    def recv_into(self, buffer: Any, nbytes: int = 0, flags: int = 0) -> int:
        view = memoryview(buffer)
        got, ancillary, _, _ = self.recvmsg_into([view[:nbytes] if nbytes else view], ANCILLARY_SIZE, flags)
        self._note(ancillary)
        return got

    def _note(self, ancillary: list[tuple[int, int, bytes]]) -> None:
        if self.payload is not None and self.last_arrival_ns:
            self.marks.append((self.last_arrival_ns, self.payload.total_bytes))
        now = perf_counter_ns()
        stamp = kernel_arrival(ancillary, now)
        if stamp is not None:
            self.kernel_reads += 1
        self.last_arrival_ns = now if stamp is None else stamp

    def attach(self, payload: Payload | None) -> None:
        """Follow ``payload`` (None: stop following); its bytes so far arrived with the last read."""
        self.payload = payload
        self.marks.clear()
        self.consumed = 0

    def split(self, data: bytes) -> list[tuple[bytes, int]]:
        """``data``, the next bytes read from the attached payload, cut where socket reads ended,
        each piece with the arrival of the read that brought it."""
        start = self.consumed
        end = self.consumed = start + len(data)
        marks = self.marks
        while marks and marks[0][1] <= start:
            marks.popleft()
        pieces: list[tuple[bytes, int]] = []
        pos = start
        while marks and marks[0][1] < end:
            stamp, total = marks.popleft()
            pieces.append((data[pos - start : total - start], stamp))
            pos = total
        # the rest came with the first read whose mark reaches it, or with the latest read
        stamp = marks[0][0] if marks else self.last_arrival_ns
        pieces.append((data[pos - start :], stamp))
        return pieces


def socket_factory(addr_info: tuple[Any, ...]) -> socket.socket:
    """For aiohttp's ``TCPConnector(socket_factory=...)``: a stamping socket where TCP allows it."""
    family, type_, proto = addr_info[0], addr_info[1], addr_info[2]
    try:
        return StampingSocket(family, type_, proto)
    except OSError:
        return socket.socket(family, type_, proto)
