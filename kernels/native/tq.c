/* llama.cpp TQ2_0 and TQ1_0 on their own row-major block layouts (see tsar/kernels/formats/tq2_0.py
 * and tq1_0.py), driven by ternary_rows.h. The fp16 block scales are not read: the integer core is the
 * exact ternary product and the float path applies the per-tensor scale.
 *
 * TQ2_0 (66-byte blocks): a step is 32 code bytes (half a block, 128 weights), D = 4 vectors: the
 *   2-bit fields (v >> 2n) & 3 hold weights 32n .. 32n + 31 of the half; activations in that order.
 * TQ1_0 (54-byte blocks): a step is one block, D = 10: the five base-3 digits of bytes 0..31
 *   (weights 32n + m), then of the 32 bytes from 32 (bytes 0..15: weights 160 + 16n + m, 16..19: the
 *   qh bytes, weights 240 + 4n + j; the rest, the scale and the next block, meet zero activations).
 * Loads reach up to 10 bytes past the last block: the weight buffer must be padded (baselines.prepare
 * pads 64 bytes). */
#include "ternary_rows.h"

#define TQ2_BLOCK_BYTES 66
#define TQ1_BLOCK_BYTES 54

static int check(const tsar_weights *w) { return w->m <= 0 || w->k <= 0 || w->k % 256 != 0; }

/* ---- TQ2_0 ---- */
static int tq2_steps(const tsar_weights *w) { return w->k / 128; }
static size_t tq2_row_bytes(const tsar_weights *w) { return (size_t)TQ2_BLOCK_BYTES * (w->k / 256); }
static size_t tq2_prep_size(const tsar_weights *w) { return tr_prep_size(4, tq2_steps(w)); }

static void tq2_prep(const tsar_acts *s, int t) {
    const int8_t *a = s->act + s->act_stride * t;
    uint8_t *p = s->prep + s->prep_stride * t;
    for (int st = 0; st < tq2_steps(s->w); st++)
        for (int n = 0; n < 4; n++) tsar_copy_bytes(p + tr_act_offset(4, st, n), a + 128 * st + 32 * n, 32);
}

static inline __attribute__((always_inline)) void tq2_decode(const uint8_t *row, int s, int scaled, __m256i *c) {
    tr_fields4(_mm256_loadu_si256((const __m256i *)(row + TQ2_BLOCK_BYTES * (s >> 1) + 32 * (s & 1))), scaled, c);
}

static void tq2_rows_avx2(const tsar_acts *s, int32_t *out, int m0, int m1) {
    tr_rows_avx2(s, out, m0, m1, tq2_decode, 4, 1, 16, 8, tq2_row_bytes(s->w), tq2_steps(s->w));
}

/* ---- TQ1_0 ---- */
static int tq1_steps(const tsar_weights *w) { return w->k / 256; }
static size_t tq1_row_bytes(const tsar_weights *w) { return (size_t)TQ1_BLOCK_BYTES * (w->k / 256); }
static size_t tq1_prep_size(const tsar_weights *w) { return tr_prep_size(10, tq1_steps(w)); }

static void tq1_prep(const tsar_acts *s, int t) {
    const int8_t *a = s->act + s->act_stride * t;
    uint8_t *p = s->prep + s->prep_stride * t;
    const int nb = tq1_steps(s->w);
    tsar_zero_bytes(p, tq1_prep_size(s->w));
    for (int b = 0; b < nb; b++) {
        const int8_t *ab = a + 256 * b;
        for (int n = 0; n < 5; n++) {
            tsar_copy_bytes(p + tr_act_offset(10, b, n), ab + 32 * n, 32);
            uint8_t *tail = p + tr_act_offset(10, b, 5 + n);
            tsar_copy_bytes(tail, ab + 160 + 16 * n, 16);
            if (n < 4) tsar_copy_bytes(tail + 16, ab + 240 + 4 * n, 4);
        }
    }
}

static inline __attribute__((always_inline)) void tq1_decode(const uint8_t *row, int s, int scaled, __m256i *c) {
    (void)scaled;
    const uint8_t *q = row + TQ1_BLOCK_BYTES * s;
    tr_digits5(_mm256_loadu_si256((const __m256i *)q), c);
    tr_digits5(_mm256_loadu_si256((const __m256i *)(q + 32)), c + 5);
}

static void tq1_rows_avx2(const tsar_acts *s, int32_t *out, int m0, int m1) {
    tr_rows_avx2(s, out, m0, m1, tq1_decode, 10, 0, 6, 0, tq1_row_bytes(s->w), tq1_steps(s->w));
}

/* AVX-VNNI: the AVX2 decoders through ternary_rows.h's vpdpbusd driver (native and simulated). */
AVXVNNI_TARGET static void tq2_rows_avxvnni(const tsar_acts *s, int32_t *out, int m0, int m1) {
    tr_rows_avxvnni(s, out, m0, m1, tq2_decode, 4, 1, tq2_row_bytes(s->w), tq2_steps(s->w));
}

AVXVNNI_TARGET static void tq1_rows_avxvnni(const tsar_acts *s, int32_t *out, int m0, int m1) {
    tr_rows_avxvnni(s, out, m0, m1, tq1_decode, 10, 0, tq1_row_bytes(s->w), tq1_steps(s->w));
}

#ifndef TSAR_SIM
/* AVX-512: a 64-byte vector holds a whole TQ2_0 block (steps 2i, 2i + 1), or the same halves of
 * two TQ1_0 blocks. */
AVX512_TARGET static inline __attribute__((always_inline)) void tq2_decode512(const uint8_t *row, int i,
                                                                              int both, __m512i *c) {
    (void)both;   /* a TQ2_0 row has an even number of steps */
    tr_fields4_512(_mm512_loadu_si512((const void *)(row + TQ2_BLOCK_BYTES * i)), c);
}

AVX512_TARGET static void tq2_rows_avx512(const tsar_acts *s, int32_t *out, int m0, int m1) {
    tr_rows_avx512(s, out, m0, m1, tq2_decode512, 4, tq2_row_bytes(s->w), tq2_steps(s->w));
}

AVX512_TARGET static inline __attribute__((always_inline)) void tq1_decode512(const uint8_t *row, int i,
                                                                              int both, __m512i *c) {
    const uint8_t *q = row + 2 * TQ1_BLOCK_BYTES * i;
    tr_digits5_512(tr_load2x256(q, q + TQ1_BLOCK_BYTES, both), c);
    tr_digits5_512(tr_load2x256(q + 32, q + TQ1_BLOCK_BYTES + 32, both), c + 5);
}

AVX512_TARGET static void tq1_rows_avx512(const tsar_acts *s, int32_t *out, int m0, int m1) {
    tr_rows_avx512(s, out, m0, m1, tq1_decode512, 10, tq1_row_bytes(s->w), tq1_steps(s->w));
}

const tsar_kernel tsar_kernel_tq2_0 = {
    .row_unit = 1, .prep_size = tq2_prep_size, .prep = tq2_prep,
    .rows = {[TSAR_ISA_AVX2] = tq2_rows_avx2, [TSAR_ISA_AVX512] = tq2_rows_avx512,
             [TSAR_ISA_AVXVNNI] = tq2_rows_avxvnni}, .check = check};
const tsar_kernel tsar_kernel_tq1_0 = {
    .row_unit = 1, .prep_size = tq1_prep_size, .prep = tq1_prep,
    .rows = {[TSAR_ISA_AVX2] = tq1_rows_avx2, [TSAR_ISA_AVX512] = tq1_rows_avx512,
             [TSAR_ISA_AVXVNNI] = tq1_rows_avxvnni}, .check = check};
#else
TSAR_SIM_PREP_SUM(tq2_0, check, tq2_prep_size, tq2_prep, tq2_rows_avx2)
TSAR_SIM_PREP_SUM(tq2_0_avxvnni, check, tq2_prep_size, tq2_prep, tq2_rows_avxvnni)
TSAR_SIM_PREP_SUM(tq1_0, check, tq1_prep_size, tq1_prep, tq1_rows_avx2)
TSAR_SIM_PREP_SUM(tq1_0_avxvnni, check, tq1_prep_size, tq1_prep, tq1_rows_avxvnni)
#endif
