"""gcc-compiled C kernels, natively and in the simulator, bit for bit.

Every kernel of ``tests/sim/c/*.c`` is built with each gcc flag set of :data:`FLAG_SETS` into one
shared object, which is called natively (ctypes) and loaded into a :class:`~tsar.sim.Machine`. Both
runs get the same inputs (random with fixed seeds, edge values planted at random positions) in
64-byte-aligned buffers, so both execute the same instructions on the same data: every buffer
afterwards (inputs included) and the return value must agree byte for byte, float results too.

The AVX-512 kernels (``avx512_kernels.c``, intrinsics) are built only with the AVX-512 flag sets
(:data:`AVX512_SETS`); the other sources with every set, so the AVX-512 sets also run gcc's
512-bit auto-vectorization of the plain-C kernels. A flag set the host CPU (or gcc) lacks is
skipped with the reason.

The default tier runs one flag set per source on a few sizes; the rest of the product (all
kernels x their flag sets x all sizes) is marked ``slow``.
"""

from __future__ import annotations

import ctypes
import functools
import platform
import shutil
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from tsar.sim import Machine, SimulationError, compile_c, create_machine
from tsar.sim.compile import CompileError
from tsar.sim.platforms.detect import cpu_flags

C_DIR = Path(__file__).parent / "c"
MIXED, AVX2, AVX512 = C_DIR / "mixed_kernels.c", C_DIR / "avx2_kernels.c", C_DIR / "avx512_kernels.c"
SOURCES = (MIXED, AVX2, AVX512)


HOST_FLAGS = cpu_flags()
_HASWELL = {"avx2", "fma", "bmi1", "bmi2", "movbe", "abm", "f16c", "popcnt"}
_ICELAKE_SERVER = _HASWELL | {"adx", "sha_ni", "vaes", "vpclmulqdq", "gfni", "avx512f", "avx512cd",
                              "avx512bw", "avx512dq", "avx512vl", "avx512ifma", "avx512vbmi",
                              "avx512_vbmi2", "avx512_vnni", "avx512_bitalg", "avx512_vpopcntdq"}
AVX512_EXPLICIT = ("-mavx512f", "-mavx512bw", "-mavx512dq", "-mavx512vl", "-mavx512vnni", "-mavx512vbmi",
                   "-mavx512vbmi2", "-mavx512bitalg", "-mavx512vpopcntdq", "-mavx512bf16", "-mavxvnni",
                   "-mgfni")

# name: (optimization level, extra flags, host CPU flags the code may use). compile_c's
# DEFAULT_FLAGS already hold -mavx2 -mfma, so every set has FMA available.
FLAG_SETS: dict[str, tuple[str, tuple[str, ...], set[str]]] = {
    "O2-avx2": ("-O2", ("-mavx2",), {"avx2", "fma"}),
    "O3-avx2-fma-unroll": ("-O3", ("-mavx2", "-mfma", "-funroll-loops"), {"avx2", "fma"}),
    "O2-haswell": ("-O2", ("-march=haswell",), _HASWELL),
    "O3-znver3": ("-O3", ("-march=znver3",), _HASWELL | {"adx", "sha_ni", "vaes", "vpclmulqdq"}),
    "O3-icelake-512": ("-O3", ("-march=icelake-server", "-mprefer-vector-width=512"), _ICELAKE_SERVER),
    # -mavx512vpopcntdq enables popcnt too
    "O2-avx512": ("-O2", AVX512_EXPLICIT, {"avx2", "fma", "popcnt", "gfni", "avx_vnni", "avx512f",
                                           "avx512bw", "avx512dq", "avx512vl", "avx512_vnni", "avx512vbmi",
                                           "avx512_vbmi2", "avx512_bitalg", "avx512_vpopcntdq",
                                           "avx512_bf16"}),
}
AVX512_SETS = ("O3-icelake-512", "O2-avx512")
"""The flag sets that build ``avx512_kernels.c``."""
FAST_FLAGS = "O3-avx2-fma-unroll"
FAST_AVX512_FLAGS = "O2-avx512"
"""The default tier's flag set for the AVX-512 kernels (every other source: :data:`FAST_FLAGS`)."""
SIZES = (0, 1, 7, 32, 33, 100, 257, 1000)
FAST_SIZES = (1, 33, 257)
GEMV_ROWS = 5

pytestmark = [
    pytest.mark.native,
    pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="needs an x86-64 host"),
    pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not found on PATH"),
    pytest.mark.skipif(not {"avx2", "fma"} <= HOST_FLAGS, reason="host CPU lacks AVX2/FMA"),
]

Arg = np.ndarray | int | float | np.float32
Variant = tuple[str, list[Arg]]

I32_MIN, I32_MAX = -(2**31), 2**31 - 1


# --- inputs ------------------------------------------------------------------------------------
def _plant(rng: np.random.Generator, arr: np.ndarray, edges) -> np.ndarray:
    """``arr`` with ``edges`` written at random distinct positions (as many as fit)."""
    edges = np.asarray(edges, arr.dtype)
    pos = rng.permutation(arr.size)[:edges.size]
    arr[pos] = edges[:pos.size]
    return arr


def _i8(rng, n):
    return rng.integers(-128, 128, n, dtype=np.int8)


def _u8(rng, n):
    return rng.integers(0, 256, n, dtype=np.uint8)


def _i32(rng, n, lo=I32_MIN, hi=I32_MAX):
    return rng.integers(lo, hi, n, dtype=np.int32, endpoint=True)


def _garbage(dtype, n) -> np.ndarray:
    """An output buffer filled with 0x5A bytes, so unwritten elements show."""
    return np.full(np.dtype(dtype).itemsize * n, 0x5A, np.uint8).view(dtype)


def _f32(values) -> np.ndarray:
    return np.asarray(values, np.float32)


def in_dot_i8(rng, n) -> list[Variant]:
    edges = [-128, 127, 0, -128, 127, -1, 1]
    return [("random", [_plant(rng, _i8(rng, n), edges), _plant(rng, _i8(rng, n), edges), n]),
            ("extreme", [np.full(n, -128, np.int8), np.full(n, -128, np.int8), n])]


def in_gemv_i8(rng, n) -> list[Variant]:
    m, k = GEMV_ROWS, n
    edges = [-128, 127, 0, -128, 127]
    w = _plant(rng, _i8(rng, m * k), edges * 4)
    return [("random", [w, _plant(rng, _i8(rng, k), edges), _garbage(np.int32, m), m, k]),
            ("extreme", [np.full(m * k, -128, np.int8), np.full(k, -128, np.int8), _garbage(np.int32, m),
                         m, k])]


def in_quant_absmax(rng, n) -> list[Variant]:
    base = _f32(rng.standard_normal(n) * 10)
    halves = _f32(rng.integers(-127, 127, n) + 0.5)
    tie_edges = [127.0, 0.5, -0.5, 1.5, -2.5, 126.5, -126.5, 0.49999997, -0.49999997, -0.0, 0.0]
    large_edges = [3.0e38, -3.0e38, 1e-40, -0.0, 0.0, 65504.0, -1e20]
    return [("random", [_plant(rng, base.copy(), [0.0, -0.0, 1e-40, -1e-40]), _garbage(np.int8, n), n]),
            # max|x| is 127 (when n > 0 the first planted edge), so the scale is exactly 1.0 and
            # the .5 values hit the rounding ties
            ("ties", [_plant(rng, halves, tie_edges), _garbage(np.int8, n), n]),
            ("large", [_plant(rng, base.copy(), large_edges), _garbage(np.int8, n), n]),
            ("zeros", [_f32(np.full(n, -0.0)), _garbage(np.int8, n), n])]


_ACC_EDGES = [I32_MIN, I32_MAX, 0, -1, 1, 16777217, -16777217, 2**30 + 1, -(2**24) - 3]


def in_dequant(rng, n) -> list[Variant]:
    acc = _plant(rng, _i32(rng, n), _ACC_EDGES)
    small = _plant(rng, _i32(rng, n, -5000, 5000), _ACC_EDGES)
    return [(f"scale={s!r}", [a, _garbage(np.float32, n), n, np.float32(s)])
            for a, s in ((acc, 0.0123), (small, -0.0), (acc, 3e38), (small, 1e-45), (small, -1.5))]


def in_hist_u8(rng, n) -> list[Variant]:
    hist = _plant(rng, rng.integers(0, 65536, 256, dtype=np.uint16), [0xFFFF, 0xFFFE, 0, 0xFFFF])
    hist[0] = hist[255] = 0xFFFF  # bins 0 and 255 wrap
    return [("random", [_plant(rng, _u8(rng, n), [0, 255, 255, 0, 128, 127]), n, hist.copy()]),
            ("one-bin", [np.full(n, 255, np.uint8), n, hist.copy()])]


def in_clamp_i16_u8(rng, n) -> list[Variant]:
    x = _plant(rng, rng.integers(-32768, 32768, n, dtype=np.int16),
               [-32768, 32767, 0, -1, 1, 510, 511, 512, -2, 200, 201])
    return [(f"lo={lo},hi={hi}", [x, _garbage(np.uint8, n), n, lo, hi])
            for lo, hi in ((0, 255), (-5, 100), (-32768, 32767), (100, 100))]


def in_wmean_f64(rng, n) -> list[Variant]:
    x = _plant(rng, _f32(rng.standard_normal(n) * np.exp2(rng.integers(-20, 20, n))),
               [-0.0, 0.0, 3e38, -3e38, 1e-40, 0.5])
    return [("random", [x, _plant(rng, _i32(rng, n), _ACC_EDGES), n]),
            ("small-w", [x, _plant(rng, _i32(rng, n, -3, 3), [0, -1, 1]), n])]


def in_unpack_ternary(rng, n) -> list[Variant]:
    nbytes = (n + 3) // 4
    packed = _plant(rng, _u8(rng, nbytes), [0x00, 0xFF, 0x55, 0xAA, 0xE4, 0x1B])
    return [("random", [packed, _garbage(np.int8, n), n]),
            ("all-ones", [np.full(nbytes, 0x55, np.uint8), _garbage(np.int8, n), n])]


def in_branchy(rng, n) -> list[Variant]:
    edges = [I32_MIN, I32_MAX, 0, -1, 1, 2, 3, 4, 5, 6, 7, -8, -7, 1000, 1001, -1001, 65536 * 3 + 5]
    wide = _plant(rng, _i32(rng, n), edges)
    narrow = _plant(rng, _i32(rng, n, -2000, 2000), edges)
    return [("wide", [wide, _garbage(np.int32, n), n]), ("narrow", [narrow, _garbage(np.int32, n), n])]


def in_lut_dot(rng, n) -> list[Variant]:
    lut = _plant(rng, _i8(rng, 16), [-128, 127, 0, -1])
    idx = _plant(rng, _u8(rng, n), [0, 15, 16, 255, 0xF0])
    x = _plant(rng, _u8(rng, n), [0, 255, 255, 1, 128])
    return [("random", [x, idx, lut, n]),
            # 255 * 127 + 255 * 127 saturates vpmaddubsw's int16 pairs
            ("saturating", [np.full(n, 255, np.uint8), idx, np.tile(np.int8([127, -128]), 8), n])]


def in_requant(rng, n) -> list[Variant]:
    acc = _plant(rng, _i32(rng, n, -40000, 40000), [0, 1, -1, 3, -3, 5, 255, -255, 257, I32_MIN, I32_MAX])
    odd = (_i32(rng, n, -300, 300) | 1).astype(np.int32)
    return [(f"scale={s!r}", [a, _garbage(np.int8, n), n, np.float32(s)])
            for a, s in ((acc, 1 / 256), (odd, 0.5), (acc, -1.0), (acc, 3e38), (odd, 0.001))]


# --- inputs of the AVX-512 kernels ----------------------------------------------------------------
_F32_EDGES = [0.0, -0.0, 1e-40, -1e-40, np.inf, -np.inf, 3.0e38, -3.0e38, 1.0, -1.5, 65504.0, 1.00390625,
              1.0078125, 2.0**-126, 16777217.0, -2.5]


def in_dot_u8i8(rng, n) -> list[Variant]:
    return [("random", [_plant(rng, _u8(rng, n), [0, 255, 255, 1, 128]),
                        _plant(rng, _i8(rng, n), [-128, 127, 0, -128, -1]), n]),
            ("extreme", [np.full(n, 255, np.uint8), np.full(n, -128, np.int8), n])]


def in_lut_vbmi(rng, n) -> list[Variant]:
    lut = _plant(rng, _i8(rng, 128), [-128, 127, 0, -1, 1])
    idx = _plant(rng, _u8(rng, n), [0, 63, 64, 127, 128, 191, 255, 0x7E, 0x81])
    return [("random", [idx, lut, _garbage(np.int8, n), n]),
            ("saturated", [idx, np.full(128, 127, np.int8), _garbage(np.int8, n), n])]


def in_widen_add(rng, n) -> list[Variant]:
    return [("random", [_plant(rng, _i8(rng, n), [-128, 127, -1]), _plant(rng, _i32(rng, n), _ACC_EDGES), n])]


def in_compress(rng, n) -> list[Variant]:
    x = _plant(rng, _i32(rng, n), _ACC_EDGES)
    return [(f"t={t}", [x, _garbage(np.int32, n), _garbage(np.int32, n), _garbage(np.int32, n), n, t])
            for t in (0, I32_MIN, I32_MAX, 1 << 30)]


def in_ternlog(rng, n) -> list[Variant]:
    def u32():
        return _plant(rng, rng.integers(0, 2**32, n, dtype=np.uint32), [0, 2**32 - 1, 0x80000000, 1])
    sparse = (u32() & u32() & u32()).astype(np.uint32)
    return [("random", [u32(), u32(), u32(), _garbage(np.uint32, n), n]),
            ("sparse", [sparse, sparse ^ np.uint32(1), u32(), _garbage(np.uint32, n), n])]


GATHER_TABLE = 61


def in_gather_scatter(rng, n) -> list[Variant]:
    table = _plant(rng, _i32(rng, GATHER_TABLE), _ACC_EDGES)
    hist = _i32(rng, GATHER_TABLE)
    return [("random", [table, _i32(rng, n, 0, GATHER_TABLE - 1), _garbage(np.int32, n), hist.copy(), n]),
            # every lane of a block scatters to one of two slots: the highest lane must win
            ("colliding", [table | 1, _i32(rng, n, 7, 8), _garbage(np.int32, n), hist.copy(), n])]


def in_dot_bf16(rng, n) -> list[Variant]:
    a = _f32(rng.standard_normal(n) * np.exp2(rng.integers(-30, 30, n)))
    b = _f32(rng.standard_normal(n))
    nans = _plant(rng, b.copy(), np.array([0x7FC00001, 0xFFA00000, 0x7F800001], np.uint32).view(np.float32))
    return [("random", [a, b, _garbage(np.uint16, n), n]),
            ("edges", [_plant(rng, a.copy(), _F32_EDGES), b, _garbage(np.uint16, n), n]),
            ("nan", [a, nans, _garbage(np.uint16, n), n])]


def in_kmask(rng, n) -> list[Variant]:
    a = _plant(rng, _i32(rng, n, -50, 50), [I32_MIN, I32_MAX, 0, 1, -1])
    return [("random", [a, _i32(rng, n, -50, 50), n]), ("equal", [a, a.copy(), n])]


def in_round(rng, n) -> list[Variant]:
    a = _f32(rng.standard_normal(n) * np.exp2(rng.integers(-40, 40, n)))
    b = _f32(rng.standard_normal(n) * np.exp2(rng.integers(-40, 40, n)))
    outs = [_garbage(np.float32, n), _garbage(np.float32, n), _garbage(np.int32, n)]
    nan = np.array([0x7FC00000, 0xFFC12345], np.uint32).view(np.float32)
    return [("random", [a, b, *outs, n]),
            ("edges", [_plant(rng, a.copy(), _F32_EDGES), _plant(rng, b.copy(), [*_F32_EDGES[::-1], *nan]),
                       *outs, n])]


def in_bits(rng, n) -> list[Variant]:
    return [("random", [_plant(rng, _u8(rng, n), [0, 255, 1, 128, 0x1F, 0x20]), _garbage(np.uint8, n),
                        _garbage(np.uint32, n // 4), n]),
            ("ones", [np.full(n, 255, np.uint8), _garbage(np.uint8, n), _garbage(np.uint32, n // 4), n])]


# --- references for the native runs (sanity: the kernels compute what they claim) ----------------
def ref_dot(a, b, n):
    return int(a.astype(np.int64) @ b.astype(np.int64)), {}


def ref_gemv(w, x, y, m, k):
    return None, {2: (w.reshape(m, k).astype(np.int64) @ x.astype(np.int64)).astype(np.int32)}


def ref_dequant(acc, out, n, scale):
    with np.errstate(over="ignore"):
        return None, {1: acc.astype(np.float32) * scale}


def ref_hist(x, n, hist):
    return None, {2: hist + np.bincount(x, minlength=256).astype(np.uint16)}


def ref_clamp(x, y, n, lo, hi):
    v = x >> 1
    return int(((v < lo) | (v > hi)).sum()), {1: np.clip(v, lo, hi).astype(np.uint8)}


def ref_unpack(packed, out, n):
    codes = ((packed[:, None] >> np.arange(0, 8, 2, dtype=np.uint8)) & 3).reshape(-1)[:n].astype(np.int8)
    return None, {1: (codes & 1) - (codes >> 1)}


def ref_lut_vbmi(idx, lut, out, n):
    wide, narrow = lut[idx & 127].astype(np.int16), lut[(idx >> 1) & 63].astype(np.int16)
    return None, {2: (wide + narrow).astype(np.uint8).view(np.int8)}


def ref_widen_add(x, y, n):
    return None, {1: (y.astype(np.int64) + x).astype(np.uint32).view(np.int32)}


def ref_compress(x, kept, dropped, spread, n, t):
    keep = x > t
    k, d = kept.copy(), dropped.copy()
    k[:keep.sum()], d[:(~keep).sum()] = x[keep], x[~keep]
    return int(keep.sum()), {1: k, 2: d, 3: np.where(keep, x, -1)}


def ref_ternlog(a, b, c, out, n):
    maj, x3 = (a & b) | (a & c) | (b & c), a ^ b ^ c
    r = (maj.astype(np.uint64) + ((x3 << 7) | (x3 >> 25))).astype(np.uint32)
    return None, {3: np.where((a & b) != 0, (r & b) | (~r & c), r)}


def ref_gather_scatter(table, idx, out, hist, n):
    got, h = table[idx], hist.copy()
    for i in range(n):
        if got[i] & 1:
            h[idx[i]] = np.int64(1000 * i + int(got[i])).astype(np.uint32).view(np.int32)
    return None, {2: got, 3: h}


def ref_bits(x, out, w, n):
    rev = np.array([int(f"{v:08b}"[::-1], 2) for v in range(256)], np.uint16)
    pop = np.unpackbits(x).reshape(-1, 8).sum(axis=1) if n else np.zeros(0, np.int64)
    padded = np.zeros(n + 4, np.uint8)
    padded[:n] = x
    dwords = padded[:4 * (n // 4 + 1)].view(np.uint32).astype(np.uint64)
    nxt = dwords[1:].copy()
    nxt[np.arange(1, nxt.size + 1) % 16 == 0] = 0  # dword j+1 starts the next 64-byte block
    d = dwords[:n // 4]
    funnel = (((d << 32) | nxt[:n // 4]) << (d & 31)) >> 32
    return int(pop.sum()), {1: (rev[x] + pop).astype(np.uint8), 2: (funnel & 0xFFFFFFFF).astype(np.uint32)}


@dataclass(frozen=True)
class Kernel:
    name: str
    source: Path
    returns: str  # Machine.call's kinds: i32, u32, i64, f32, f64, none
    inputs: Callable[[np.random.Generator, int], list[Variant]]
    reference: Callable | None = None
    needs: frozenset[str] = frozenset()  # host CPU flags beyond the flag set's (target attributes)


KERNELS = {k.name: k for k in [
    Kernel("dot_i8", MIXED, "i32", in_dot_i8, ref_dot),
    Kernel("gemv_i8", MIXED, "none", in_gemv_i8, ref_gemv),
    Kernel("quant_absmax_i8", MIXED, "f32", in_quant_absmax),
    Kernel("dequant_i32", MIXED, "none", in_dequant, ref_dequant),
    Kernel("hist_u8", MIXED, "none", in_hist_u8, ref_hist),
    Kernel("clamp_i16_u8", MIXED, "u32", in_clamp_i16_u8, ref_clamp),
    Kernel("wmean_f64", MIXED, "f64", in_wmean_f64),
    Kernel("unpack_ternary", MIXED, "none", in_unpack_ternary, ref_unpack),
    Kernel("branchy_i32", MIXED, "i64", in_branchy),
    Kernel("lut_dot_avx2", AVX2, "i32", in_lut_dot),
    Kernel("requant_avx2", AVX2, "none", in_requant),
    Kernel("dot_vnni512", AVX512, "i32", in_dot_u8i8, ref_dot),
    Kernel("dot_avxvnni256", AVX512, "i32", in_dot_u8i8, ref_dot, frozenset({"avx_vnni"})),
    Kernel("lut_vbmi", AVX512, "none", in_lut_vbmi, ref_lut_vbmi),
    Kernel("widen_add_masked", AVX512, "none", in_widen_add, ref_widen_add),
    Kernel("compress_expand", AVX512, "i64", in_compress, ref_compress),
    Kernel("ternlog_mix", AVX512, "none", in_ternlog, ref_ternlog),
    Kernel("gather_scatter", AVX512, "none", in_gather_scatter, ref_gather_scatter),
    Kernel("dot_bf16", AVX512, "f32", in_dot_bf16, needs=frozenset({"avx512_bf16"})),
    Kernel("kmask_ops", AVX512, "u32", in_kmask),
    Kernel("round_embedded", AVX512, "none", in_round),
    Kernel("bits_avx512", AVX512, "u64", in_bits, ref_bits),
]}


# --- building and running ------------------------------------------------------------------------
def _flag_sets(source: Path) -> tuple[str, ...]:
    """The flag sets ``source`` is built with."""
    return AVX512_SETS if source == AVX512 else tuple(FLAG_SETS)


def _fast_flags(source: Path) -> str:
    return FAST_AVX512_FLAGS if source == AVX512 else FAST_FLAGS


def _require_host(flags: str, kernel: Kernel | None = None) -> None:
    missing = FLAG_SETS[flags][2] - HOST_FLAGS
    if missing:
        pytest.skip(f"host CPU lacks {', '.join(sorted(missing))} needed by {flags}")
    missing = (kernel.needs if kernel else frozenset()) - HOST_FLAGS
    if missing:
        pytest.skip(f"host CPU lacks {', '.join(sorted(missing))} needed by {kernel.name}")


@functools.cache
def _compile(source: Path, flags: str) -> Path:
    opt, extra, _ = FLAG_SETS[flags]
    return compile_c(source, flags=list(extra), opt=opt)


def _build(source: Path, flags: str) -> Path:
    """The shared object of ``source`` for ``flags``; skips when gcc does not know an option of
    the set (an older gcc and the AVX-512 extensions)."""
    try:
        return _compile(source, flags)
    except CompileError as exc:
        if "unrecognized command-line option" in str(exc) or "attribute(target(" in str(exc):
            pytest.skip(f"gcc does not support {flags}: {str(exc).splitlines()[-1]}")
        raise


@functools.cache
def _machine(source: Path, flags: str) -> Machine:
    m = create_machine(code_size=1 << 20, data_size=4 << 20, timeout=120.0)
    m.load_elf(_build(source, flags))
    return m


_CTYPES_RET = {"i32": ctypes.c_int32, "u32": ctypes.c_uint32, "i64": ctypes.c_int64,
               "u64": ctypes.c_uint64, "f32": ctypes.c_float, "f64": ctypes.c_double, "none": None}


def _aligned(arr: np.ndarray) -> np.ndarray:
    """A 64-byte-aligned copy (the simulator aligns its buffers so; both runs take the same path)."""
    buf = np.empty(arr.nbytes + 64, np.uint8)
    start = (-buf.ctypes.data) % 64
    out = buf[start:start + arr.nbytes].view(arr.dtype).reshape(arr.shape)
    out[...] = arr
    return out


def _call_native(path: Path, kernel: Kernel, args: list[Arg]) -> tuple[object, list[np.ndarray]]:
    fn = getattr(ctypes.CDLL(str(path)), kernel.name)
    types, values, arrays = [], [], []
    for a in args:
        if isinstance(a, np.ndarray):
            arrays.append(_aligned(a))
            types.append(ctypes.c_void_p)
            values.append(arrays[-1].ctypes.data)
        elif isinstance(a, np.float32):
            types.append(ctypes.c_float)
            values.append(float(a))
        elif isinstance(a, float):
            types.append(ctypes.c_double)
            values.append(a)
        else:
            types.append(ctypes.c_int64)
            values.append(int(a))
    fn.argtypes, fn.restype = types, _CTYPES_RET[kernel.returns]
    return fn(*values), arrays


def _call_sim(machine: Machine, kernel: Kernel, args: list[Arg]) -> tuple[object, list[np.ndarray]]:
    args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    result = machine.call(kernel.name, *args, returns=kernel.returns)
    return result, [a for a in args if isinstance(a, np.ndarray)]


def _bits(value: object, returns: str) -> object:
    if returns == "f32":
        return struct.pack("<f", value).hex()
    if returns == "f64":
        return struct.pack("<d", value).hex()
    return value


def _inputs(kernel: Kernel, n: int) -> list[Variant]:
    return kernel.inputs(np.random.default_rng(zlib.crc32(f"{kernel.name}/{n}".encode())), n)


def check_kernel(name: str, flags: str, n: int) -> None:
    kernel = KERNELS[name]
    _require_host(flags, kernel)
    path = _build(kernel.source, flags)
    machine = _machine(kernel.source, flags)
    for label, args in _inputs(kernel, n):
        where = f"{name} [{flags}] n={n} {label}"
        native, native_arrays = _call_native(path, kernel, args)
        try:
            sim, sim_arrays = _call_sim(machine, kernel, args)
        except SimulationError as exc:
            raise AssertionError(f"{where}: simulator failed: {exc}") from exc
        assert _bits(sim, kernel.returns) == _bits(native, kernel.returns), \
            f"{where}: return value: simulator {sim!r}, native {native!r}"
        for i, (s, nat) in enumerate(zip(sim_arrays, native_arrays, strict=True)):
            np.testing.assert_array_equal(s.view(np.uint8), nat.view(np.uint8),
                                          err_msg=f"{where}: array argument {i} (raw bytes)")


def _cases(fast: bool) -> list:
    out = []
    for name, kernel in KERNELS.items():
        for flags in _flag_sets(kernel.source):
            for n in SIZES:
                if (flags == _fast_flags(kernel.source) and n in FAST_SIZES) == fast:
                    out.append(pytest.param(name, flags, n, id=f"{name}-{flags}-n{n}"))
    return out


# --- tests -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,flags,n", _cases(fast=True))
def test_gcc_kernel_matches_native(name: str, flags: str, n: int):
    check_kernel(name, flags, n)


@pytest.mark.slow
@pytest.mark.parametrize("name,flags,n", _cases(fast=False))
def test_gcc_kernel_matches_native_all(name: str, flags: str, n: int):
    check_kernel(name, flags, n)


@pytest.mark.parametrize("source,flags", [pytest.param(s, f, id=f"{s.stem}-{f}")
                                          for s in SOURCES for f in _flag_sets(s)])
def test_kernels_build_freestanding(source: Path, flags: str):
    """Every flag set builds each of its sources into an object with no undefined symbols (no
    memset or libgcc call crept in) that exports its kernels."""
    m = create_machine(code_size=1 << 20, data_size=1 << 20)
    symbols = m.load_elf(_build(source, flags))
    assert {k.name for k in KERNELS.values() if k.source == source} <= set(symbols)


@pytest.mark.parametrize("name", [k for k, v in KERNELS.items() if v.reference is not None])
def test_native_kernels_match_reference(name: str):
    kernel = KERNELS[name]
    flags = _fast_flags(kernel.source)
    _require_host(flags, kernel)
    path = _build(kernel.source, flags)
    for n in SIZES:
        for label, args in _inputs(kernel, n):
            result, arrays = _call_native(path, kernel, args)
            expect, outputs = kernel.reference(*args)
            if expect is not None:
                assert result == expect, f"{name} n={n} {label}"
            array_args = [i for i, a in enumerate(args) if isinstance(a, np.ndarray)]
            for arg_index, want in outputs.items():
                got = arrays[array_args.index(arg_index)]
                np.testing.assert_array_equal(got.view(np.uint8), np.asarray(want, got.dtype).view(np.uint8),
                                              err_msg=f"{name} n={n} {label}")
