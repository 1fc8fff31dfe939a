"""Kernel receive stamps over TLS: the lean client's HTTPS connections keep their token arrival times.

Why: asyncio's TLS layer reads the socket with plain ``recv``, so the kernel's receive stamp is lost
and an HTTPS stream would be stamped when the event loop got round to it. Here TLS runs in memory
(:class:`ssl.SSLObject` over two :class:`ssl.MemoryBIO`) on top of the stamped socket of
:mod:`mcp_bench.protocols.rx_stamps`: a read's ciphertext is decrypted at once and the plaintext
carries that read's stamp, i.e. the arrival of the packet that completed the TLS record (its
bytes could not be read any earlier).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from dataclasses import dataclass

from mcp_bench.protocols.rx_stamps import Receiver, StampedTransport

_RECORD_READ = 262144


@dataclass(frozen=True)
class TlsSession:
    """A TLS session in memory: ciphertext in through ``incoming``, out through ``outgoing``."""

    tls: ssl.SSLObject
    incoming: ssl.MemoryBIO
    outgoing: ssl.MemoryBIO


async def handshake(
    loop: asyncio.AbstractEventLoop, sock: socket.socket, context: ssl.SSLContext, server_hostname: str
) -> TlsSession:
    """The TLS handshake on a connected non-blocking socket, in memory; the session it opens."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname=server_hostname)
    while True:
        try:
            tls.do_handshake()
            break
        except ssl.SSLWantReadError:
            if outgoing.pending:
                await loop.sock_sendall(sock, outgoing.read())
            data = await loop.sock_recv(sock, _RECORD_READ)
            if not data:
                raise ConnectionResetError("connection closed during the TLS handshake") from None
            incoming.write(data)
    if outgoing.pending:
        await loop.sock_sendall(sock, outgoing.read())
    return TlsSession(tls, incoming, outgoing)


class StampedTlsTransport(StampedTransport):
    """A stamped socket carrying one TLS session: writes are encrypted, reads decrypted with their stamp."""

    __slots__ = ("_incoming", "_outgoing", "_tls")

    def __init__(
        self, loop: asyncio.AbstractEventLoop, sock: socket.socket, receiver: Receiver, session: TlsSession
    ) -> None:
        self._tls = session.tls
        self._incoming = session.incoming
        self._outgoing = session.outgoing
        super().__init__(loop, sock, receiver)

    def write(self, data: bytes) -> None:
        if self.closing:
            return
        try:
            self._tls.write(data)
        except ssl.SSLError as exc:
            self._lost(exc)
            return
        self._flush()

    def _flush(self) -> None:
        if self._outgoing.pending:
            StampedTransport.write(self, self._outgoing.read())

    def _received(self, data: bytes, arrival: int) -> None:
        self._incoming.write(data)
        plain: list[bytes] = []
        ended = False
        while True:
            try:
                chunk = self._tls.read(_RECORD_READ)
            except ssl.SSLWantReadError:
                break
            except ssl.SSLZeroReturnError:  # the peer closed the session cleanly
                ended = True
                break
            except ssl.SSLError as exc:
                self._lost(exc)
                return
            if not chunk:
                ended = True
                break
            plain.append(chunk)
        self._flush()  # a key update or a post-handshake message may want an answer
        if plain:
            self.receiver.bytes_arrived(b"".join(plain), arrival)
        if ended:
            self._lost(None)
