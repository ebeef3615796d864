"""Thin, fast access to Unicorn's C API (the Python binding's per-call overhead is several us).

Register batches read and write straight into numpy buffers; hooks are registered with plain
ctypes callbacks (the caller is responsible for catching every exception inside them).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence

import numpy as np
import unicorn
import unicorn.x86_const as X
from unicorn.unicorn_py3.unicorn import (
    HOOK_CODE_CFUNC,
    HOOK_INSN_INVALID_CFUNC,
    HOOK_MEM_ACCESS_CFUNC,
    HOOK_MEM_INVALID_CFUNC,
    uc_hook_h,
    uclib,
)

from tsar.isa.config import VECTOR_REGISTERS
from tsar.isa.operands import GPR64

GPR_IDS = tuple(getattr(X, f"UC_X86_REG_{name.upper()}") for name in GPR64)
"""Unicorn ids of the 64-bit GPRs in x86 encoding order."""
XMM_IDS = tuple(X.UC_X86_REG_XMM0 + i for i in range(VECTOR_REGISTERS))


class RegBatch:
    """Read/write a fixed list of registers into ``values`` (uint64 each) or given host buffers."""

    def __init__(self, uc: unicorn.Uc, ids: Sequence[int], pointers: Sequence[int] | None = None) -> None:
        self._uch = uc._uch
        self.count = len(ids)
        self.values = np.zeros(self.count, np.uint64)
        ptrs = pointers if pointers is not None else [self.values.ctypes.data + 8 * i
                                                     for i in range(self.count)]
        self._ids = (ctypes.c_int * self.count)(*ids)
        self._ptrs = (ctypes.c_void_p * self.count)(*ptrs)

    def read(self) -> None:
        uclib.uc_reg_read_batch(self._uch, self._ids, self._ptrs, self.count)

    def write(self) -> None:
        uclib.uc_reg_write_batch(self._uch, self._ids, self._ptrs, self.count)


class Hooks:
    """Registers raw hooks on one engine and keeps their callbacks alive."""

    def __init__(self, uc: unicorn.Uc) -> None:
        self._uch = uc._uch
        self._keep: dict[int, object] = {}  # handle value -> its callback

    def _add(self, kind: int, cfunc: object, begin: int, end: int) -> uc_hook_h:
        handle = uc_hook_h()
        status = uclib.uc_hook_add(self._uch, ctypes.byref(handle), kind,
                                   ctypes.cast(cfunc, ctypes.c_void_p), None,
                                   ctypes.c_uint64(begin), ctypes.c_uint64(end))
        if status != unicorn.UC_ERR_OK:
            raise unicorn.UcError(status)
        self._keep[handle.value] = cfunc
        return handle

    def code(self, callback: Callable[[int, int, int], None], begin: int, end: int,
             block: bool = False) -> uc_hook_h:
        """``callback(handle, address, size)`` before each instruction (or block) in range."""
        cfunc = HOOK_CODE_CFUNC(lambda h, addr, size, ud: callback(h, addr, size))
        return self._add(unicorn.UC_HOOK_BLOCK if block else unicorn.UC_HOOK_CODE, cfunc, begin, end)

    def invalid(self, callback: Callable[[int], bool]) -> uc_hook_h:
        cfunc = HOOK_INSN_INVALID_CFUNC(lambda h, ud: callback(h))
        return self._add(unicorn.UC_HOOK_INSN_INVALID, cfunc, 1, 0)

    def memory(self, callback: Callable[[int, int, int], None], begin: int = 1,
               end: int = 0) -> uc_hook_h:
        """``callback(access, address, size)`` on every data read/write Unicorn performs at an
        address in ``[begin, end]`` (everywhere by default). While any such hook exists, code
        translated by Unicorn takes its slow memory path (about 20 ns more per access)."""
        cfunc = HOOK_MEM_ACCESS_CFUNC(lambda h, acc, addr, size, value, ud: callback(acc, addr, size))
        return self._add(unicorn.UC_HOOK_MEM_READ | unicorn.UC_HOOK_MEM_WRITE, cfunc, begin, end)

    def invalid_memory(self, callback: Callable[[int, int, int], bool]) -> uc_hook_h:
        """``callback(access, address, size)`` on an access to unmapped or protected memory;
        returning False lets the access fault."""
        cfunc = HOOK_MEM_INVALID_CFUNC(lambda h, acc, addr, size, value, ud: callback(acc, addr, size))
        return self._add(unicorn.UC_HOOK_MEM_INVALID, cfunc, 1, 0)

    def remove(self, handle: uc_hook_h) -> None:
        uclib.uc_hook_del(self._uch, handle)
        self._keep.pop(handle.value, None)


_RIP = ctypes.c_uint64(0)


def set_rip(handle: int, value: int) -> None:
    """Write RIP from inside a hook; Unicorn leaves the current block and resumes there (a batch
    write of RIP does not do that)."""
    _RIP.value = value
    uclib.uc_reg_write(handle, X.UC_X86_REG_RIP, ctypes.byref(_RIP))


def emu_stop(handle: int) -> None:
    uclib.uc_emu_stop(handle)
