"""Native baseline kernels (C, AVX2 with AVX-512 variants chosen from CPUID) called on numpy arrays.

    k = prepare("tl2", w_t, w_scale)          # pack ternary int8 (M, K) weights once
    y = k.matmul(x, threads=2)                # float32 (N, K) -> (N, M): quantize, product, dequantize
    acc = k.matmul_int(a_q)                   # int8 (N, K) -> int32 (N, M): the integer core only

Kernels (``KERNELS``): ``tl2``, ``tl1``, ``i2s`` (bitnet.cpp formats), ``dense`` (int8 weights,
pmaddubsw / vpdpbusd), ``int2`` (Intel's interleaved 2-bit layout, up-convert + pmaddubsw /
vpdpbusd), ``trit5`` (5 trits per byte; VBMI lookups + vpdpbusd, AVX2 decode), ``tq1_0`` / ``tq2_0``
(llama.cpp) and ``iq1_bn`` / ``iq2_bn`` (ik_llama.cpp) on their public block layouts (decode +
pmaddubsw / vpdpbusd). ``threads`` splits output rows
(pthreads); the C call releases the GIL. Activations given to ``matmul_int`` must be in [-127, 127]
(what BitLinear's quantizer produces). A prepared kernel keeps a workspace, so do not call one object
from several Python threads at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tsar.kernels._native import ffi, lib
from tsar.kernels.registry import KERNELS, NATIVE_KERNELS

_IDS = {name: getattr(lib, spec.lib_id) for name, spec in NATIVE_KERNELS.items()}
ISAS = {"auto": lib.TSAR_ISA_AUTO, "avx2": lib.TSAR_ISA_AVX2, "avx512": lib.TSAR_ISA_AVX512,
        "avxvnni": lib.TSAR_ISA_AVXVNNI}
_ISA_NAMES = {v: k for k, v in ISAS.items()}
MAX_THREADS = 64
ALIGN = 64


def aligned_empty(nbytes: int, align: int = ALIGN) -> np.ndarray:
    """Uninitialized uint8 buffer of ``nbytes`` whose data pointer is a multiple of ``align``."""
    raw = np.empty(nbytes + align, np.uint8)
    start = (-raw.ctypes.data) % align
    return raw[start:start + nbytes]


def cpu_isa() -> str:
    """Best instruction set the kernels can use here: 'avx512' (F/BW/VL/VNNI), 'avxvnni' (AVX2 with
    the VEX vpdpbusd), 'avx2' or 'none'."""
    return _ISA_NAMES.get(lib.tsar_cpu_isa(), "none")


def kernel_isa(name: str, isa: str = "auto") -> str | None:
    """ISA variant that ``name`` runs with for the requested ``isa`` here, or None if unavailable."""
    _check_name(name)
    _check_isa_name(isa)
    got = lib.tsar_kernel_isa(_IDS[name], ISAS[isa])
    return _ISA_NAMES[got] if got >= 0 else None


def kernel_isas(name: str) -> tuple[str, ...]:
    """Every ISA level ``name`` has a build of that this CPU runs (``avx2``, ``avxvnni``,
    ``avx512``), in :data:`ISAS` order."""
    return tuple(isa for isa in ISAS if isa != "auto" and kernel_isa(name, isa) == isa)


def _check_name(name: str) -> None:
    if name not in _IDS:
        raise ValueError(f"unknown kernel {name!r}; expected one of {', '.join(KERNELS)}")


def _check_isa_name(isa: str) -> None:
    if isa not in ISAS:
        raise ValueError(f"unknown isa {isa!r}; expected one of {', '.join(ISAS)}")


@dataclass
class NativeKernel:
    """Weights packed for one native kernel, ready to multiply."""

    name: str
    m: int
    k: int
    w_scale: float
    packed: Any                       # the format object (formats.*)
    nbytes: int                       # weight bytes one product reads
    _data: np.ndarray = field(repr=False)
    _aux: np.ndarray | None = field(repr=False)
    _desc: Any = field(repr=False)
    _work: dict[int, np.ndarray] = field(default_factory=dict, repr=False)

    @property
    def bits_per_weight(self) -> float:
        return 8.0 * self.nbytes / (self.m * self.k)

    def copy(self) -> NativeKernel:
        """Same weights in a fresh buffer (to rotate through copies larger than the caches)."""
        buf = aligned_empty(self._data.size)
        buf[:] = self._data
        desc = ffi.new("tsar_weights *")
        desc.w = ffi.cast("const uint8_t *", buf.ctypes.data)
        desc.aux, desc.m, desc.k = self._desc.aux, self.m, self.k
        desc.bm, desc.bk = self._desc.bm, self._desc.bk
        return NativeKernel(self.name, self.m, self.k, self.w_scale, self.packed, self.nbytes, buf,
                            self._aux, desc)

    def isa(self, isa: str = "auto") -> str | None:
        return kernel_isa(self.name, isa)

    def _workspace(self, n: int) -> np.ndarray:
        buf = self._work.get(n)
        if buf is None:
            buf = aligned_empty(int(lib.tsar_work_size(_IDS[self.name], self._desc, n)))
            self._work = {n: buf}
        return buf

    def _checks(self, arr: np.ndarray, dtype: type, what: str, threads: int, isa: str) -> int:
        if not isinstance(arr, np.ndarray):
            raise ValueError(f"{self.name} {what}: expected a numpy array, got {type(arr).__name__}")
        if arr.dtype != dtype:
            raise ValueError(f"{self.name} {what}: expected dtype {np.dtype(dtype)}, got {arr.dtype}")
        if arr.ndim != 2 or arr.shape[1] != self.k or arr.shape[0] < 1:
            raise ValueError(f"{self.name} {what}: expected shape (N, {self.k}) with N >= 1, got {arr.shape}")
        if not arr.flags.c_contiguous or not arr.flags.aligned:
            raise ValueError(f"{self.name} {what}: expected a C-contiguous, aligned array "
                             f"(got strides {arr.strides}); use np.ascontiguousarray")
        if not isinstance(threads, (int, np.integer)) or not 1 <= threads <= MAX_THREADS:
            raise ValueError(f"{self.name}: threads must be an int in [1, {MAX_THREADS}], got {threads!r}")
        _check_isa_name(isa)
        if kernel_isa(self.name, isa) is None:
            raise ValueError(f"{self.name}: isa {isa!r} is not available on this CPU (has {cpu_isa()})")
        return ISAS[isa]

    def matmul(self, x: np.ndarray, threads: int = 1, isa: str = "auto") -> np.ndarray:
        """float32 (N, K) -> float32 (N, M): per-token int8 quantization, product, dequantization."""
        code = self._checks(x, np.float32, "activations", threads, isa)
        y = np.empty((x.shape[0], self.m), np.float32)
        rc = lib.tsar_matmul_f32(_IDS[self.name], code, self._desc, ffi.from_buffer("float[]", x),
                                 ffi.from_buffer("float[]", y), self.w_scale, x.shape[0], int(threads),
                                 ffi.from_buffer(self._workspace(x.shape[0])))
        _raise_rc(rc, self.name)
        return y

    def matmul_int(self, a_q: np.ndarray, threads: int = 1, isa: str = "auto") -> np.ndarray:
        """int8 (N, K) activations in [-127, 127] -> exact int32 (N, M) products."""
        code = self._checks(a_q, np.int8, "activations", threads, isa)
        out = np.empty((a_q.shape[0], self.m), np.int32)
        rc = lib.tsar_matmul_int(_IDS[self.name], code, self._desc, ffi.from_buffer("int8_t[]", a_q),
                                 ffi.from_buffer("int32_t[]", out), a_q.shape[0], int(threads),
                                 ffi.from_buffer(self._workspace(a_q.shape[0])))
        _raise_rc(rc, self.name)
        return out


def time_matmul(copies: list[NativeKernel], x: np.ndarray, threads: int = 1, isa: str = "auto",
                repeats: int = 20) -> np.ndarray:
    """Wall seconds of ``repeats`` ``matmul`` calls timed in C, rotating through ``copies``."""
    first = copies[0]
    code = first._checks(x, np.float32, "activations", threads, isa)
    if any(c.name != first.name or (c.m, c.k) != (first.m, first.k) for c in copies):
        raise ValueError("time_matmul: all copies must be the same kernel and shape")
    if repeats < 1:
        raise ValueError(f"time_matmul: repeats must be >= 1, got {repeats}")
    descs = ffi.new("tsar_weights *[]", [c._desc for c in copies])
    y = np.empty((x.shape[0], first.m), np.float32)
    seconds = np.empty(repeats, np.float64)
    rc = lib.tsar_bench_f32(_IDS[first.name], code, descs, len(copies), ffi.from_buffer("float[]", x),
                            ffi.from_buffer("float[]", y), first.w_scale, x.shape[0], int(threads),
                            ffi.from_buffer(first._workspace(x.shape[0])), repeats,
                            ffi.from_buffer("double[]", seconds))
    _raise_rc(rc, first.name)
    return seconds


def _raise_rc(rc: int, name: str) -> None:
    if rc:
        raise RuntimeError(f"{name}: native call failed with code {rc}")


def prepare(name: str, w_t: np.ndarray, w_scale: float = 1.0, **options: int) -> NativeKernel:
    """Pack ternary int8 (M, K) weights for kernel ``name``.

    ``options`` go to the format's ``pack`` (``bm``/``bk`` for tl2 and tl1). Shape rules: tl2 M % 32,
    (K % bk) % 32 == 0; tl1 M % 32, K % 128; i2s K % 128; dense K % 64 and |w| <= 64; int2 M % 32,
    K % 4; trit5 M % 32; tq1_0 / tq2_0 K % 256; iq1_bn / iq2_bn K % 64.
    """
    _check_name(name)
    bm = bk = 0
    aux = None
    spec = NATIVE_KERNELS[name]
    packed = spec.packer.pack(w_t, **options)
    if spec.blocked:
        if getattr(packed, "bmm", 32) != 32:
            raise ValueError(f"{name} kernel: expected bmm=32, got {packed.bmm}")
        data, bm, bk, nbytes = packed.data, packed.bm, packed.bk, packed.nbytes
    else:
        data, nbytes = packed.data.view(np.uint8), packed.nbytes
    if spec.aux:   # dense: the row sums, and its int16 flush step in bk
        aux, bk = packed.aux, packed.bk
    m, k = np.asarray(w_t).shape
    buf = aligned_empty(data.size + ALIGN)
    buf[:data.size] = data
    buf[data.size:] = 0
    desc = ffi.new("tsar_weights *")
    desc.w = ffi.cast("const uint8_t *", buf.ctypes.data)
    desc.aux = ffi.cast("const int32_t *", aux.ctypes.data) if aux is not None else ffi.NULL
    desc.m, desc.k, desc.bm, desc.bk = m, k, bm, bk
    return NativeKernel(name, m, k, float(w_scale), packed, int(nbytes), buf, aux, desc)


def int8_peak(isa: str = "auto", iterations: int = 20_000_000, repeats: int = 5) -> float:
    """The host's int8 multiply-add peak in ops/s, one thread (best of repeats): independent
    vpmaddubsw + vpaddw (AVX2), vpdpbusd zmm (AVX-512 VNNI) or the VEX vpdpbusd ymm (AVX-VNNI)
    with no loads; 2 ops per multiply-add."""
    chosen = cpu_isa() if isa == "auto" else isa
    code = ISAS.get(chosen) if chosen != "auto" else None
    ops = float(lib.tsar_int8_peak(code, iterations, repeats)) if code else -1.0
    if ops <= 0:
        raise ValueError(f"no int8 multiply-add peak for isa {chosen!r} on this CPU")
    return ops


def stream_read_bandwidth(nbytes: int = 1 << 28, threads: int = 1, repeats: int = 5) -> float:
    """Measured streaming-read bandwidth in bytes/s over a fresh ``nbytes`` buffer (best of repeats)."""
    if not 1 <= threads <= MAX_THREADS:
        raise ValueError(f"threads must be in [1, {MAX_THREADS}], got {threads}")
    buf = aligned_empty(nbytes)
    buf[:] = 1
    return float(lib.tsar_stream_read(ffi.from_buffer(buf), nbytes, threads, repeats))
