"""Guest memory: one host buffer, of which Unicorn maps the used parts with ``mem_map_ptr``.

The guest sees a read-only code region at ``base``, a read-write data region and the stack at the
top, each followed by an unmapped guard page (nothing is mapped below ``base`` or above the stack's
top). Unicorn and the Python vector layer share the same
host bytes, so the vector layer reads and writes guest memory through numpy slices without calling
into Unicorn.

In a *guarded* arena (the :class:`~tsar.sim.Machine`'s) only the data allocations are accessible
in the data region: each starts on a page boundary and is followed by at least one guard page, and
an access that leaves it by even one byte faults. The accessors check bounds with one page-table
lookup: every page of an accessible range holds that range's end (as an arena offset), every other
page a sentinel, so ``off + nbytes <= limit[off >> 12]`` is the whole in-bounds test.
"""

from __future__ import annotations

import mmap
from dataclasses import dataclass

import numpy as np

from tsar.sim.errors import GuestFault

PAGE = 4096
PAGE_SHIFT = 12
GUARD = PAGE
"""Bytes of unmapped guard after each region and after each data allocation."""
_NO_ACCESS = -(1 << 70)  # page-table sentinel: no ``off + nbytes`` is at most this
_NEAR = 1 << 20  # bytes: a fault farther than this from every range names none


def _round_up(value: int, align: int) -> int:
    return (value + align - 1) // align * align


@dataclass(frozen=True)
class Span:
    """A named range of guest memory: an array argument, the code or the stack (bytes)."""

    start: int
    size: int
    label: str
    writable: bool = True

    @property
    def end(self) -> int:
        return self.start + self.size


class GuestMemory:
    """Host-backed guest arena. Sizes in bytes, page-aligned.

    Layout: ``code`` at ``base``, ``data`` after it, ``stack`` at the top, a guard page after each.
    ``guarded=True`` makes the data region accessible only through :meth:`alloc` ranges.
    """

    def __init__(self, base: int = 0x1000_0000, code_size: int = 16 << 20,
                 data_size: int = 512 << 20, stack_size: int = 1 << 20, *,
                 guarded: bool = False) -> None:
        self.base, self.guarded = base, guarded
        self.code_size = _round_up(code_size, PAGE)
        self.data_size = _round_up(data_size, PAGE)
        self.stack_size = _round_up(stack_size, PAGE)
        self.code_start = base
        self.code_end = base + self.code_size
        self.data_start = self.code_end + GUARD
        self.data_end = self.data_start + self.data_size
        self.stack_start = self.data_end + GUARD
        self.end = self.stack_start + self.stack_size  # the stack's top; unmapped above
        self.size = self.end - base
        self._mmap = mmap.mmap(-1, self.size)
        self.buf = np.frombuffer(self._mmap, dtype=np.uint8)
        self.code_top = self.code_start  # next free code byte
        self.data_top = self.data_start  # next free data byte
        self.code = Span(self.code_start, self.code_size, "the code", writable=False)
        self.stack = Span(self.stack_start, self.stack_size, "the stack")
        self.allocations: list[Span] = []  # live data allocations (guarded arenas), by address
        # per page: end offset of the readable / writable range holding it; negative offsets
        # index the padding at the end (Python lists count from the end), also _NO_ACCESS
        pages = (self.size >> PAGE_SHIFT) + (base >> PAGE_SHIFT) + 1
        self._read_end = [_NO_ACCESS] * pages
        self._write_end = [_NO_ACCESS] * pages
        fixed = [self.code, self.stack]
        if not guarded:
            fixed.append(Span(self.data_start, self.data_size, "the data region"))
        for span in fixed:
            self._set_pages(span, True)
        self._fixed = fixed
        self.view, self.wview = self._accessors()

    @property
    def host_address(self) -> int:
        """Host address of the first arena byte (for ``mem_map_ptr``)."""
        return self.buf.ctypes.data

    def regions(self) -> list[tuple[int, int, str]]:
        """``(start, size, perms)`` of the regions mapped for the whole session: code and stack,
        and the data region unless the arena is guarded (then each allocation is mapped)."""
        regions = [(self.code_start, self.code_size, "rx"), (self.stack_start, self.stack_size, "rw")]
        if not self.guarded:
            regions.insert(1, (self.data_start, self.data_size, "rw"))
        return regions

    # --- allocation ------------------------------------------------------------------------------
    def alloc_code(self, nbytes: int, align: int = 64) -> int:
        addr = _round_up(self.code_top, align)
        if addr + nbytes > self.code_end:
            raise MemoryError(f"code region full ({self.code_size} bytes)")
        self.code_top = addr + nbytes
        return addr

    def alloc(self, nbytes: int, align: int = 64, label: str = "") -> int:
        """Reserve ``nbytes`` of data memory aligned to ``align``; returns the guest address.

        In a guarded arena the range starts on a page boundary, is followed by a guard page and
        is the only accessible part of its pages; ``label`` names it in fault messages.
        """
        if not self.guarded:
            addr = _round_up(self.data_top, align)
            if addr + nbytes > self.data_end:
                raise MemoryError(f"data region full: {nbytes} bytes requested, {self.data_size} in all")
            self.data_top = addr + max(nbytes, 1)
            return addr
        addr = _round_up(self.data_top, max(align, PAGE))
        if addr + nbytes > self.data_end:
            raise MemoryError(f"data region full: {nbytes} bytes requested, {self.data_size} in all")
        span = Span(addr, nbytes, label or f"the {nbytes}-byte array at {addr:#x}")
        self.allocations.append(span)
        self._set_pages(span, True)
        self.data_top = _round_up(addr + max(nbytes, 1), PAGE) + GUARD
        return addr

    def release(self, mark: int) -> None:
        """Free the data allocations made since ``data_top`` was ``mark`` (the bytes are kept)."""
        while self.allocations and self.allocations[-1].start >= mark:
            self._set_pages(self.allocations.pop(), False)
        self.data_top = mark

    def _set_pages(self, span: Span, accessible: bool) -> None:
        first = (span.start - self.base) >> PAGE_SHIFT
        last = (span.start - self.base + max(span.size, 1) - 1) >> PAGE_SHIFT
        n = last - first + 1
        end = span.end - self.base
        self._read_end[first:last + 1] = [end if accessible else _NO_ACCESS] * n
        self._write_end[first:last + 1] = [end if accessible and span.writable else _NO_ACCESS] * n

    # --- access ----------------------------------------------------------------------------------
    def _accessors(self):
        """``view(addr, n)``: readable ``uint8`` view of guest bytes ``[addr, addr + n)``;
        ``wview(addr, n)``: writable view. Closures over locals, because they run for every
        vector memory operand; the fault path is :meth:`fault`."""
        buf, base, read_end, write_end = self.buf, self.base, self._read_end, self._write_end
        fault, shift = self.fault, PAGE_SHIFT

        def view(addr: int, nbytes: int) -> np.ndarray:
            off = addr - base
            try:
                if off + nbytes <= read_end[off >> shift]:
                    return buf[off:off + nbytes]
            except IndexError:
                pass
            raise fault(addr, nbytes, "read")

        def wview(addr: int, nbytes: int) -> np.ndarray:
            off = addr - base
            try:
                if off + nbytes <= write_end[off >> shift]:
                    return buf[off:off + nbytes]
            except IndexError:
                pass
            raise fault(addr, nbytes, "write")
        return view, wview

    def page_limits(self, write: bool) -> list[int]:
        """The page table of reads (writes): ``off + nbytes <= limits[off >> PAGE_SHIFT]`` is the
        in-bounds test of an access of ``nbytes`` at arena offset ``off`` (see the module doc)."""
        return self._write_end if write else self._read_end

    def accessible(self, addr: int, nbytes: int, write: bool) -> bool:
        """Whether guest bytes ``[addr, addr + nbytes)`` may be read (written)."""
        off = addr - self.base
        table = self._write_end if write else self._read_end
        return 0 <= off < self.size and off + nbytes <= table[off >> PAGE_SHIFT]

    def fault(self, addr: int, nbytes: int, access: str) -> GuestFault:
        """The fault of an access (``read``, ``write`` or ``fetch``) that is not allowed."""
        return GuestFault("memory", self.describe(addr, nbytes, access), addr)

    def nearest(self, addr: int, nbytes: int = 1) -> Span | None:
        """The code, stack or data range closest to ``[addr, addr + nbytes)`` (within 1 MiB)."""
        best, best_gap = None, _NEAR + 1
        for span in sorted((*self._fixed, *self.allocations), key=lambda s: s.start):
            if addr + nbytes <= span.start:
                gap = span.start - (addr + nbytes)
            elif addr >= span.end:
                gap = addr - span.end
            else:
                gap = 0
            if gap < best_gap:  # ties: the lower range (an overrun is likelier than an underrun)
                best, best_gap = span, gap
        return best

    def describe(self, addr: int, nbytes: int, access: str) -> str:
        """One line naming the range nearest a faulting access, the offset from its start and how
        far the access reaches past its end or before its start, e.g. ``read of 1 byte at
        0x11001a00, offset +2560 of arg 0 (i8[2560]): 1 byte past its end``."""
        head = f"{access} of {nbytes} byte{'s' if nbytes != 1 else ''} at {addr:#x}"
        span = self.nearest(addr, nbytes)
        if span is None:
            return f"{head}: unmapped, not near the code, the stack or an argument array"
        off = addr - span.start
        where = f"{head}, offset {off:+d} of {span.label}"
        if off < 0:
            hint = " (stack overflow)" if span is self.stack else ""
            return f"{where}: {-off} byte{'s' if off != -1 else ''} before its start{hint}"
        if addr + nbytes > span.end:
            past = addr + nbytes - span.end
            return f"{where}: {past} byte{'s' if past != 1 else ''} past its end"
        if access == "write" and not span.writable:
            return f"{where}: {span.label} is read-only"
        if access == "fetch":
            return f"{where}: {span.label} is not executable"
        return f"{where}: not accessible"

    def read(self, addr: int, nbytes: int) -> bytes:
        return self.view(addr, nbytes).tobytes()

    def write(self, addr: int, data: bytes | np.ndarray, *, code: bool = False) -> None:
        """Store bytes; ``code=True`` allows writing the code region (loaders only)."""
        raw = np.frombuffer(bytes(data), np.uint8) if isinstance(data, bytes | bytearray) else \
            np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        dst = self.view(addr, raw.size) if code else self.wview(addr, raw.size)
        dst[:] = raw
