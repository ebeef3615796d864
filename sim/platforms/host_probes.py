"""Tiny native probes (compiled at run time with gcc, loaded through cffi): a streaming-read
kernel for bandwidth and a dependent-add chain for the core clock.

The shared object is built once into the project's build cache (:mod:`tsar.common.toolchain`),
named by a hash of the source and flags. Returns None when no compiler is available.
"""

from __future__ import annotations

import tempfile
from functools import cache
from pathlib import Path
from typing import Any

from tsar.common.toolchain import CompileError, build_shared

SOURCE = r"""
#include <stddef.h>
#include <stdint.h>
#if defined(__AVX2__)
#include <immintrin.h>
#endif

/* Read `bytes` (multiple of 256) `reps` times; returns a checksum so nothing is optimized away. */
uint64_t tsar_read(const void *buf, size_t bytes, long reps) {
#if defined(__AVX2__)
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    for (long r = 0; r < reps; r++) {
        const __m256i *p = (const __m256i *)buf, *end = (const __m256i *)((const char *)buf + bytes);
        for (; p < end; p += 8) {
            a0 = _mm256_add_epi64(a0, _mm256_load_si256(p + 0));
            a1 = _mm256_add_epi64(a1, _mm256_load_si256(p + 1));
            a2 = _mm256_add_epi64(a2, _mm256_load_si256(p + 2));
            a3 = _mm256_add_epi64(a3, _mm256_load_si256(p + 3));
            a4 = _mm256_add_epi64(a4, _mm256_load_si256(p + 4));
            a5 = _mm256_add_epi64(a5, _mm256_load_si256(p + 5));
            a6 = _mm256_add_epi64(a6, _mm256_load_si256(p + 6));
            a7 = _mm256_add_epi64(a7, _mm256_load_si256(p + 7));
        }
    }
    a0 = _mm256_add_epi64(_mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3)),
                          _mm256_add_epi64(_mm256_add_epi64(a4, a5), _mm256_add_epi64(a6, a7)));
    uint64_t out[4];
    _mm256_storeu_si256((__m256i *)out, a0);
    return out[0] + out[1] + out[2] + out[3];
#else
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (long r = 0; r < reps; r++) {
        const uint64_t *p = (const uint64_t *)buf;
        for (size_t i = 0; i < bytes / 8; i += 4) {
            s0 += p[i]; s1 += p[i + 1]; s2 += p[i + 2]; s3 += p[i + 3];
        }
    }
    return s0 + s1 + s2 + s3;
#endif
}

/* 8 dependent 1-cycle register-register adds per iteration: 8*n cycles. (Adds of an immediate
   are folded at rename by recent Intel cores, which made the chain run several times faster than
   the clock.) */
uint64_t tsar_chain(uint64_t n) {
    uint64_t x = 0, one = n | 1;
    for (uint64_t i = 0; i < n; i++) {
        __asm__ volatile("add %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\t"
                         "add %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0" : "+r"(x) : "r"(one));
    }
    return x;
}

/* The same chain beside two independent 512-bit integer multiply-adds per iteration (vpmaddwd
   zmm, off the critical path: they fit in the chain's 8 cycles): the clock while the core runs
   heavy AVX-512 code, which Intel cores lower (the AVX-512 frequency license); call it only on a
   CPU with AVX512BW. */
uint64_t tsar_chain512(uint64_t n) {
    uint64_t x = 0, one = n | 1;
    for (uint64_t i = 0; i < n; i++) {
        __asm__ volatile("add %1, %0\n\tvpmaddwd %%zmm1, %%zmm2, %%zmm3\n\tadd %1, %0\n\tadd %1, %0\n\t"
                         "add %1, %0\n\tvpmaddwd %%zmm1, %%zmm2, %%zmm4\n\tadd %1, %0\n\tadd %1, %0\n\t"
                         "add %1, %0\n\tadd %1, %0" : "+r"(x) : "r"(one) : "xmm3", "xmm4");
    }
    __asm__ volatile("vzeroupper" ::: "xmm3", "xmm4");
    return x;
}
"""
CDEF = ("uint64_t tsar_read(const void *buf, size_t bytes, long reps); uint64_t tsar_chain(uint64_t n); "
        "uint64_t tsar_chain512(uint64_t n);")


@cache
def probes(avx2: bool = True) -> Any | None:
    """The loaded probe library (cffi ``lib``), or None without gcc/cffi."""
    try:
        import cffi
    except ImportError:
        return None
    flags = ["-O2", "-shared", "-fPIC"] + (["-mavx2"] if avx2 else [])
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "probes.c"
        src.write_text(SOURCE)
        try:
            out = build_shared([src], flags, name="probes")
        except CompileError:
            return None
    ffi = cffi.FFI()
    ffi.cdef(CDEF)
    lib = ffi.dlopen(str(out))
    return ffi, lib
