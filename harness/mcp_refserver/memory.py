"""The reference server's memory model: what the GPU-memory forensics are checked against.

SIMULATED GPU memory (``nv_gpu_memory_used_bytes``; no GPU is involved): a constant base, plus
``gpu_memory_per_request_bytes`` for every request in service (activations and KV cache that a
level borrows and gives back), plus ``leak_bytes_per_request`` for every request ever finished
(memory a leaking server never gives back). The leak is also held for real, in this process, so
its resident set (``process_resident_memory_bytes``) grows by the same amount.
"""

from __future__ import annotations


class MemoryModel:
    """Memory borrowed by requests in service and kept by finished ones (see the module doc)."""

    def __init__(self, base_bytes: int, per_request_bytes: int, leak_bytes_per_request: int) -> None:
        self.base_bytes = base_bytes
        self.per_request_bytes = per_request_bytes
        self.leak_bytes_per_request = leak_bytes_per_request
        self.leaked_bytes = 0
        self._kept: list[bytes] = []

    def finished(self) -> None:
        """One request ended: keep its leak, written so the pages are really resident."""
        if self.leak_bytes_per_request:
            self._kept.append(b"\xa5" * self.leak_bytes_per_request)
            self.leaked_bytes += self.leak_bytes_per_request

    def used_bytes(self, in_service: int) -> int:
        return self.base_bytes + in_service * self.per_request_bytes + self.leaked_bytes
