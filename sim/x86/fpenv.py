"""The guest's MXCSR and how floating-point instructions honour it.

Arithmetic that numpy performs with the host's SSE/AVX units (add, multiply, divide, square root,
conversions between float formats) runs under the guest's rounding control, DAZ and FTZ bits: the
host MXCSR is loaded with them (every exception masked) for the duration of the operation and the
exception flags the host raised are collected (:meth:`FpEnv.host`). Operations whose flags or
rounding numpy cannot express (compares, float -> integer conversions, rounding to integers, FMA
in double precision, half precision) compute their flags explicitly (:meth:`FpEnv.signal`).
After each instruction the raised flags are OR-ed into the guest MXCSR; a flag whose exception is
unmasked raises #XM before the destination is written (:meth:`FpEnv.commit`).

MXCSR bits: IE 0, DE 1, ZE 2, OE 3, UE 4, PE 5 (sticky flags), DAZ 6, masks 7-12, RC 13-14,
FTZ 15.
"""

from __future__ import annotations

import ctypes
import mmap
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import numpy as np

from tsar.sim.errors import GuestFault

IE, DE, ZE, OE, UE, PE = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20
FLAGS = 0x3F
DAZ, MASKS, RC_MASK, FTZ = 0x40, 0x1F80, 0x6000, 0x8000
RC_SHIFT = 13
CONTROL = RC_MASK | DAZ | FTZ
"""The MXCSR bits the host takes from the guest while it computes for it."""
RN, RD, RU, RZ = 0, 1, 2, 3
"""Rounding control values: to nearest even, down (toward -inf), up (toward +inf), toward zero."""
MXCSR_DEFAULT = 0x1F80
MXCSR_RESERVED = 0xFFFF0000
FLAG_NAMES = {IE: "invalid", DE: "denormal", ZE: "divide-by-zero", OE: "overflow",
              UE: "underflow", PE: "precision"}

_NUMPY_FLAGS = {1: ZE, 2: OE, 4: UE, 8: IE}
"""numpy's floating-point error bits (divide, over, under, invalid) as MXCSR flags."""

# uint32 swap(uint32 new): stmxcsr [rsp-8]; mov [rsp-4], edi; ldmxcsr [rsp-4]; mov eax, [rsp-8]
_SWAP_CODE = bytes.fromhex("0fae5c24f8 897c24fc 0fae5424fc 8b4424f8 c3".replace(" ", ""))
_page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
_page.write(_SWAP_CODE)
host_swap: Callable[[int], int] = ctypes.CFUNCTYPE(ctypes.c_uint32, ctypes.c_uint32)(
    ctypes.addressof(ctypes.c_char.from_buffer(_page)))
"""Load the host MXCSR with the argument and return its previous value."""

T = TypeVar("T")


class FpEnv:
    """The guest MXCSR (``mxcsr``) and the flags raised by the instruction now executing."""

    def __init__(self) -> None:
        self.mxcsr = MXCSR_DEFAULT
        self.raised = 0
        self.capturing = False  # an instruction's floating-point work is running (see host)
        self.in_session = False  # inside session(): numpy's error callback already routed here

    @property
    def rc(self) -> int:
        return (self.mxcsr >> RC_SHIFT) & 3

    @property
    def daz(self) -> bool:
        return bool(self.mxcsr & DAZ)

    @property
    def ftz(self) -> bool:
        return bool(self.mxcsr & FTZ)

    def host(self, f: Callable[..., T], *args: object) -> T:
        """``f(*args)`` with the host MXCSR holding the guest's RC/DAZ/FTZ (exceptions masked);
        the flags it raised are added to :attr:`raised`.

        numpy clears the host's invalid, divide-by-zero, overflow and underflow flags before each
        ufunc or cast and reports them after it: those four come from numpy's error callback,
        precision and denormal (which numpy leaves alone) from the host MXCSR."""
        old = host_swap((self.mxcsr & CONTROL) | MASKS)
        self.capturing = True
        try:
            if self.in_session:
                return f(*args)
            with np.errstate(all="call", call=self._numpy_flag):
                return f(*args)
        finally:
            self.capturing = False
            self.raised |= host_swap(old) & FLAGS

    def _numpy_flag(self, kind: str, flags: int) -> None:
        if not self.capturing:
            return  # numpy work outside a floating-point instruction (integer scalars...)
        for bit, mxcsr_flag in _NUMPY_FLAGS.items():
            if flags & bit:
                self.raised |= mxcsr_flag

    @contextmanager
    def session(self) -> Iterator[None]:
        """numpy's error reporting routed to this environment for a whole run (entering
        ``np.errstate`` once instead of per instruction); reports outside :meth:`host` are
        dropped."""
        if self.in_session:
            yield
            return
        with np.errstate(all="call", call=self._numpy_flag):
            self.in_session = True
            try:
                yield
            finally:
                self.in_session = False

    def signal(self, flags: int) -> None:
        self.raised |= flags

    def commit(self, text: str = "") -> None:
        """Add the raised flags to the MXCSR; #XM when one of them is unmasked."""
        raised, self.raised = self.raised, 0
        if raised:
            self.mxcsr |= raised
            unmasked = raised & ~(self.mxcsr >> 7) & FLAGS
            if unmasked:
                names = ", ".join(n for bit, n in FLAG_NAMES.items() if unmasked & bit)
                raise GuestFault("xm", f"unmasked SIMD floating-point exception ({names})"
                                 + (f" in {text}" if text else ""))

    def load(self, value: int) -> None:
        """vldmxcsr: reserved bits set raise #GP."""
        if value & MXCSR_RESERVED:
            raise GuestFault("gp", f"vldmxcsr with reserved bits set ({value:#010x})")
        self.mxcsr = value


# --- classification helpers on float32 / float64 lanes ---------------------------------------------

_QUIET_BIT = {np.dtype(np.float32): (np.uint32, np.uint32(1 << 22)),
              np.dtype(np.float64): (np.uint64, np.uint64(1 << 51))}
_TINY = {np.dtype(np.float32): np.finfo(np.float32).tiny, np.dtype(np.float64): np.finfo(np.float64).tiny}
_ZERO = {np.dtype(np.float32): np.float32(0), np.dtype(np.float64): np.float64(0)}


def is_snan(x: np.ndarray) -> np.ndarray:
    udt, bit = _QUIET_BIT[x.dtype]
    return np.isnan(x) & ((x.view(udt) & bit) == 0)


def is_denormal(x: np.ndarray) -> np.ndarray:
    a = np.abs(x)
    return (a < _TINY[x.dtype]) & (a != _ZERO[x.dtype])


def quiet(x: np.ndarray) -> np.ndarray:
    """NaN lanes with the quiet bit set (other lanes unchanged)."""
    udt, bit = _QUIET_BIT[x.dtype]
    return np.where(np.isnan(x), (x.view(udt) | bit).view(x.dtype), x)


def default_nan(dt: type) -> np.generic:
    """The x86 "real indefinite" QNaN (sign set, top fraction bit set)."""
    if np.dtype(dt) == np.float32:
        return np.uint32(0xFFC00000).view(np.float32)
    return np.uint64(0xFFF8000000000000).view(np.float64)


def denormal_inputs(env: FpEnv, *xs: np.ndarray, skip: np.ndarray | None = None) -> list[np.ndarray]:
    """Apply DAZ (denormal inputs become signed zeros) or signal DE for denormal inputs of
    lanes with no NaN operand (a NaN operand, and an invalid operation the caller marks in
    ``skip``, take precedence over the denormal exception)."""
    dens = [is_denormal(x) for x in xs]
    if not any(d.any() for d in dens):
        return list(xs)
    if env.daz:
        return [np.where(d, np.copysign(np.zeros_like(x), x), x) for x, d in zip(xs, dens, strict=True)]
    blocked = np.zeros(np.broadcast_shapes(*(x.shape for x in xs)), bool)
    if skip is not None:
        blocked |= skip
    for x in xs:
        blocked |= np.isnan(x)
    if any((d & ~blocked).any() for d in dens):
        env.signal(DE)
    return list(xs)
