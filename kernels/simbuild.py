"""Build the integer cores (AVX2; AVX-512 rows where the registry lists them) as a self-contained
ELF shared object for the functional simulator.

The library has no libc calls, no threads and no CPUID dispatch (gcc ``-O3 -mavx2 -mfma -mf16c
-fPIC -shared -nostdlib -fno-stack-protector -fno-builtin``, plus ``-fno-tree-loop-distribute-patterns``
so gcc does not turn loops into memset/memcpy calls). Entry points (System V ABI; ``a`` is one token of
k int8 activations in [-127, 127], ``out`` m int32, ``work`` 64-byte aligned scratch):

    unsigned long tsar_sim_tl2_work_size(int m, int k, int bm, int bk);
    int tsar_sim_tl2_gemv(const uint8_t *w, int m, int k, int bm, int bk, const int8_t *a, void *work,
                          int32_t *out);
    unsigned long tsar_sim_tl1_work_size(int m, int k, int bm, int bk);
    int tsar_sim_tl1_gemv(const uint8_t *w, int m, int k, int bm, int bk, const int8_t *a, void *work,
                          int32_t *out);
    int tsar_sim_i2s_gemv(const uint8_t *w, int m, int k, const int8_t *a, int32_t *out);   /* m % 4 == 0 */
    int tsar_sim_int2_gemv(const uint8_t *w, int m, int k, const int8_t *a, int32_t *out);
    unsigned long tsar_sim_tq2_0_work_size(int m, int k, int bm, int bk);   /* bm, bk unused */
    int tsar_sim_tq2_0_gemv(const uint8_t *w, int m, int k, const int8_t *a, void *work, int32_t *out);
                                       /* likewise tq1_0, iq2_bn, iq1_bn, trit5 (prepared activations) */
    unsigned long tsar_sim_dense_work_size(int m, int k, int bm, int bk);
    int tsar_sim_dense_gemv(const uint8_t *w, const int32_t *aux, int m, int k, int bm, int bk,
                            const int8_t *a, void *work, int32_t *out);
                   /* the weight descriptor: aux the row sums, bk the int16 flush step; a 32-byte aligned */

and for n tokens (``a`` n x k, ``out`` n x m, ``work`` 64-byte aligned scratch of the size
``*_gemm_work_size`` reports: the LUT kernels' n tables, the prepared kernels' n sums and n prepared
tokens, or the others' n sums and decode buffer),
through the same token-blocked rows functions that run natively:

    unsigned long tsar_sim_tl2_gemm_work_size(int m, int k, int bm, int bk, int n);   /* every kernel */
    int tsar_sim_tl2_gemm(const uint8_t *w, int m, int k, int bm, int bk, const int8_t *a, int n,
                          void *work, int32_t *out);                      /* likewise tl1 */
    int tsar_sim_i2s_gemm(const uint8_t *w, int m, int k, const int8_t *a, int n, void *work,
                          int32_t *out);           /* likewise int2, trit5, tq2_0, tq1_0, iq2_bn, iq1_bn */
    int tsar_sim_dense_gemm(const uint8_t *w, const int32_t *aux, int m, int k, int bm, int bk,
                            const int8_t *a, int n, void *work, int32_t *out);

A kernel whose registry entry lists ``avx512`` in ``sim_isas`` also has the same entry points
through its AVX-512 rows function, named with the ISA (``tsar_sim_int2_avx512_gemv``...: EVEX code,
simulated on any host, run natively only on one with the flags of ``registry.SIM_ISAS``; trit5's
are its VBMI rows, which need ``avx512vbmi`` too); likewise ``avxvnni`` (``tsar_sim_int2_avxvnni_gemv``...).

Weights are in the formats of :mod:`tsar.kernels.formats` (``TL2Weights.data`` etc.), padded by the
registry's ``overread`` bytes; 0 means success (-1: a shape the format cannot take).

The library also holds the other operators of a decoded token (``native/ops.c``, AVX2 + FMA + F16C,
simulated by :mod:`tsar.simulate.operators`). Floats are float32, f16 values their uint16 bits; sizes
are positive multiples of 8 (rope's ``hd`` of 16, the LM head's ``k`` of 32, attention's ``ctx`` and
``hd`` of 8); 0 means success, -1 a size the entry does not take:

    int tsar_sim_op_embed(const uint16_t *table, int row, float *y, int n);      /* y = f32(table[row]) */
    int tsar_sim_op_rmsnorm(const float *x, const float *w, float *y, int n, float eps);
    int tsar_sim_op_quantize(const float *x, int8_t *q, float *scale, int n);    /* as quant.py, bit-exact */
    int tsar_sim_op_rope(float *x, const float *cos_t, const float *sin_t, int heads, int hd);  /* NEOX */
    int tsar_sim_op_attention(const float *q, const float *k_new, const float *v_new, uint16_t *kcache,
                              uint16_t *vcache, float *out, float *scores, int heads, int kv_heads,
                              int hd, int ctx);    /* one token at ctx - 1; caches f16 [ctx][kv_heads][hd] */
    int tsar_sim_op_ffn_act(const float *g, const float *u, float *y, int n, int kind);  /* relu^2, silu */
    int tsar_sim_op_f16_gemv(const uint16_t *w, const float *x, float *y, int m, int k);   /* LM head */
    int tsar_sim_op_argmax(const float *x, int n);      /* index of the first maximum (-1: bad n) */
"""

from __future__ import annotations

import subprocess
from functools import partial
from pathlib import Path

from tsar.common.toolchain import build_shared
from tsar.kernels.registry import NATIVE_KERNELS, SIM_LIBRARY, sim_entry

SOURCES = (*dict.fromkeys(NATIVE_KERNELS[name].c_source for name in SIM_LIBRARY), "ops.c")
FLAGS = ("-O3", "-mavx2", "-mfma", "-mf16c", "-fPIC", "-shared", "-nostdlib", "-fno-stack-protector",
         "-fno-builtin", "-fno-tree-loop-distribute-patterns", "-std=gnu11", "-DTSAR_SIM=1")
ENTRY_POINTS = tuple(entry for name in SIM_LIBRARY for stem in map(partial(sim_entry, name),
                                                                     NATIVE_KERNELS[name].sim_isas)
                     for entry in (([f"tsar_sim_{stem}_work_size"] if NATIVE_KERNELS[name].gemv_work else [])
                                   + [f"tsar_sim_{stem}_gemv", f"tsar_sim_{stem}_gemm_work_size",
                                      f"tsar_sim_{stem}_gemm"]))
OP_ENTRY_POINTS = tuple(f"tsar_sim_op_{op}" for op in ("embed", "rmsnorm", "quantize", "rope", "attention",
                                                         "ffn_act", "f16_gemv", "argmax"))
"""The token operators' entries (``native/ops.c``)."""
NATIVE_DIR = Path(__file__).resolve().parent / "native"


def build_sim_library(cc: str = "gcc", out_dir: Path | None = None) -> Path:
    """Compile (or reuse from the build cache) the simulator library and return its path.

    Raises CompileError if compilation fails, RuntimeError if the result imports any symbol.
    """
    out = build_shared([NATIVE_DIR / s for s in SOURCES], [*FLAGS, "-I", str(NATIVE_DIR)],
                       name="tsar_sim_kernels", headers=sorted(NATIVE_DIR.glob("*.h")), compiler=cc,
                       out_dir=out_dir)
    undefined = undefined_symbols(out)
    if undefined:
        out.unlink()
        raise RuntimeError(f"simulator library imports symbols {undefined}; expected none")
    return out


def undefined_symbols(path: Path) -> list[str]:
    """Dynamic symbols the shared object imports (``nm -D --undefined-only``)."""
    proc = subprocess.run(["nm", "-D", "--undefined-only", str(path)], capture_output=True, text=True,
                          check=True)
    return [line.split()[-1] for line in proc.stdout.splitlines() if line.strip()]
