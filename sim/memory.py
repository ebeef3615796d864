"""Guest memory: one host buffer mapped into Unicorn with ``mem_map_ptr``.

The guest sees a contiguous arena ``[base, base + size)``: a read-only code region, a read-write
data region (bump-allocated) and the stack at the top. Unicorn and the Python vector layer share the
same host bytes, so the vector layer reads and writes guest memory through numpy slices without
calling into Unicorn. Addresses outside the arena are unmapped and fault in both.
"""

from __future__ import annotations

import mmap

import numpy as np

from .errors import GuestFault

PAGE = 4096


def _round_up(value: int, align: int) -> int:
    return (value + align - 1) // align * align


class GuestMemory:
    """Host-backed guest arena. Sizes in bytes, page-aligned.

    Layout: ``code`` at ``base``, ``data`` after it, ``stack`` at the top.
    """

    def __init__(self, base: int = 0x1000_0000, code_size: int = 16 << 20,
                 data_size: int = 512 << 20, stack_size: int = 1 << 20) -> None:
        self.base = base
        self.code_size = _round_up(code_size, PAGE)
        self.data_size = _round_up(data_size, PAGE)
        self.stack_size = _round_up(stack_size, PAGE)
        self.size = self.code_size + self.data_size + self.stack_size
        self._mmap = mmap.mmap(-1, self.size)
        self.buf = np.frombuffer(self._mmap, dtype=np.uint8)
        self.code_start = base
        self.data_start = base + self.code_size
        self.stack_start = self.data_start + self.data_size
        self.end = base + self.size
        self.code_top = self.code_start  # next free code byte
        self.data_top = self.data_start  # next free data byte
        self.view, self.wview = self._accessors()

    @property
    def host_address(self) -> int:
        """Host address of the first arena byte (for ``mem_map_ptr``)."""
        return self.buf.ctypes.data

    def regions(self) -> list[tuple[int, int, str]]:
        """``(start, size, perms)`` of the code, data and stack regions."""
        return [(self.code_start, self.code_size, "rx"), (self.data_start, self.data_size, "rw"),
                (self.stack_start, self.stack_size, "rw")]

    # --- allocation ------------------------------------------------------------------------------
    def alloc_code(self, nbytes: int, align: int = 64) -> int:
        addr = _round_up(self.code_top, align)
        if addr + nbytes > self.data_start:
            raise MemoryError(f"code region full ({self.code_size} bytes)")
        self.code_top = addr + nbytes
        return addr

    def alloc(self, nbytes: int, align: int = 64) -> int:
        """Reserve ``nbytes`` of data memory aligned to ``align``; returns the guest address."""
        addr = _round_up(self.data_top, align)
        if addr + nbytes > self.stack_start:
            raise MemoryError(f"data region full: {nbytes} bytes requested, {self.data_size} in all")
        self.data_top = addr + max(nbytes, 1)
        return addr

    def reset_data(self) -> None:
        """Free every data allocation (the bytes are kept)."""
        self.data_top = self.data_start

    # --- access ----------------------------------------------------------------------------------
    def _accessors(self):
        """``view(addr, n)``: readable ``uint8`` view of guest bytes ``[addr, addr + n)``;
        ``wview(addr, n)``: writable view (the code region is read-only). Closures over locals,
        because they run for every vector memory operand."""
        buf, base, size, code_size = self.buf, self.base, self.size, self.code_size

        def view(addr: int, nbytes: int) -> np.ndarray:
            off = addr - base
            if off < 0 or off + nbytes > size:
                raise GuestFault("memory", f"read of {nbytes} bytes at unmapped {addr:#x}", addr)
            return buf[off:off + nbytes]

        def wview(addr: int, nbytes: int) -> np.ndarray:
            off = addr - base
            if off < code_size or off + nbytes > size:
                what = "read-only code" if 0 <= off < code_size else "unmapped memory"
                raise GuestFault("memory", f"write of {nbytes} bytes to {what} at {addr:#x}", addr)
            return buf[off:off + nbytes]
        return view, wview

    def read(self, addr: int, nbytes: int) -> bytes:
        return self.view(addr, nbytes).tobytes()

    def write(self, addr: int, data: bytes | np.ndarray, *, code: bool = False) -> None:
        """Store bytes; ``code=True`` allows writing the code region (loaders only)."""
        raw = np.frombuffer(bytes(data), np.uint8) if isinstance(data, bytes | bytearray) else \
            np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        dst = self.view(addr, raw.size) if code else self.wview(addr, raw.size)
        dst[:] = raw
