/* ik_llama.cpp IQ2_BN and IQ1_BN on their own row-major layouts (see tsar/kernels/formats/iq2_bn.py
 * and iq1_bn.py), driven by ternary_rows.h. The row scale in front of each row is skipped: the integer
 * core is the exact ternary product and the float path applies the per-tensor scale.
 *
 * IQ2_BN (row: 4-byte scale, 16-byte blocks of 64): a step is two blocks (32 bytes), D = 4: field
 *   (v >> 2s) & 3 holds weights 16s .. 16s + 15 of the first block in its low 16 bytes and of the
 *   second block in its high 16 bytes.
 * IQ1_BN (row: 2-byte scale, 13-byte blocks of 64): a step is two blocks, each loaded as 16 bytes into
 *   one 128-bit lane, D = 5 digit vectors (multiplier 3^d gives weight j = 4 - d of each five; byte 12
 *   gives weight 16(4 - d) + 15; bytes 13..15 belong to the next block and meet zero activations).
 * With an odd number of blocks the last step's second block is whatever follows (the next row or the
 * buffer's padding) against zero activations; loads reach up to 16 bytes past the last row: the
 * weight buffer must be padded (baselines.prepare pads 64 bytes). */
#include "ternary_rows.h"

#define IQ2_SCALE_BYTES 4
#define IQ1_SCALE_BYTES 2
#define IQ1_BLOCK_BYTES 13

static int check(const tsar_weights *w) { return w->m <= 0 || w->k <= 0 || w->k % 64 != 0; }
static int steps(const tsar_weights *w) { return (w->k / 64 + 1) / 2; }

/* ---- IQ2_BN ---- */
static size_t iq2_row_bytes(const tsar_weights *w) { return IQ2_SCALE_BYTES + (size_t)w->k / 4; }
static size_t iq2_prep_size(const tsar_weights *w) { return tr_prep_size(4, steps(w)); }

static void iq2_prep(const tsar_acts *s, int t) {
    const int8_t *a = s->act + s->act_stride * t;
    uint8_t *p = s->prep + s->prep_stride * t;
    const int nb = s->w->k / 64;
    tsar_zero_bytes(p, iq2_prep_size(s->w));
    for (int b = 0; b < nb; b++)
        for (int f = 0; f < 4; f++)
            tsar_copy_bytes(p + tr_act_offset(4, b / 2, f) + 16 * (b & 1), a + 64 * b + 16 * f, 16);
}

static inline __attribute__((always_inline)) void iq2_decode(const uint8_t *row, int s, int scaled, __m256i *c) {
    tr_fields4(_mm256_loadu_si256((const __m256i *)(row + IQ2_SCALE_BYTES + 32 * s)), scaled, c);
}

static void iq2_rows_avx2(const tsar_acts *s, int32_t *out, int m0, int m1) {
    tr_rows_avx2(s, out, m0, m1, iq2_decode, 4, 1, 16, 8, iq2_row_bytes(s->w), steps(s->w));
}

/* ---- IQ1_BN ---- */
static size_t iq1_row_bytes(const tsar_weights *w) { return IQ1_SCALE_BYTES + (size_t)IQ1_BLOCK_BYTES * (w->k / 64); }
static size_t iq1_prep_size(const tsar_weights *w) { return tr_prep_size(5, steps(w)); }

static void iq1_prep(const tsar_acts *s, int t) {
    const int8_t *a = s->act + s->act_stride * t;
    uint8_t *p = s->prep + s->prep_stride * t;
    const int nb = s->w->k / 64;
    tsar_zero_bytes(p, iq1_prep_size(s->w));
    for (int b = 0; b < nb; b++) {
        const int8_t *ab = a + 64 * b;
        for (int d = 0; d < 5; d++) {
            int8_t *slot = (int8_t *)p + tr_act_offset(5, b / 2, d) + 16 * (b & 1);
            for (int i = 0; i < 12; i++) slot[i] = ab[16 * (i / 3) + 5 * (i % 3) + 4 - d];
            if (d >= 1) slot[12] = ab[16 * (4 - d) + 15];
        }
    }
}

static inline __attribute__((always_inline)) void iq1_decode(const uint8_t *row, int s, int scaled, __m256i *c) {
    (void)scaled;
    const uint8_t *q = row + IQ1_SCALE_BYTES + 2 * IQ1_BLOCK_BYTES * s;
    tr_digits5(_mm256_loadu2_m128i((const __m128i *)(q + IQ1_BLOCK_BYTES), (const __m128i *)q), c);
}

static void iq1_rows_avx2(const tsar_acts *s, int32_t *out, int m0, int m1) {
    tr_rows_avx2(s, out, m0, m1, iq1_decode, 5, 0, 12, 0, iq1_row_bytes(s->w), steps(s->w));
}

/* AVX-VNNI: the AVX2 decoders through ternary_rows.h's vpdpbusd driver (native and simulated). */
AVXVNNI_TARGET static void iq2_rows_avxvnni(const tsar_acts *s, int32_t *out, int m0, int m1) {
    tr_rows_avxvnni(s, out, m0, m1, iq2_decode, 4, 1, iq2_row_bytes(s->w), steps(s->w));
}

AVXVNNI_TARGET static void iq1_rows_avxvnni(const tsar_acts *s, int32_t *out, int m0, int m1) {
    tr_rows_avxvnni(s, out, m0, m1, iq1_decode, 5, 0, iq1_row_bytes(s->w), steps(s->w));
}

#ifndef TSAR_SIM
/* AVX-512: a 64-byte vector holds four blocks (two steps); with `both` clear the upper half is zero. */
AVX512_TARGET static inline __attribute__((always_inline)) void iq2_decode512(const uint8_t *row, int i,
                                                                              int both, __m512i *c) {
    const uint8_t *q = row + IQ2_SCALE_BYTES + 64 * i;
    tr_fields4_512(both ? _mm512_loadu_si512((const void *)q)
                        : _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)q)), c);
}

AVX512_TARGET static void iq2_rows_avx512(const tsar_acts *s, int32_t *out, int m0, int m1) {
    tr_rows_avx512(s, out, m0, m1, iq2_decode512, 4, iq2_row_bytes(s->w), steps(s->w));
}

AVX512_TARGET static inline __attribute__((always_inline)) void iq1_decode512(const uint8_t *row, int i,
                                                                              int both, __m512i *c) {
    const uint8_t *q = row + IQ1_SCALE_BYTES + 4 * IQ1_BLOCK_BYTES * i;
    __m512i v = _mm512_zextsi256_si512(_mm256_loadu2_m128i((const __m128i *)(q + IQ1_BLOCK_BYTES),
                                                           (const __m128i *)q));
    if (both)
        v = _mm512_inserti64x4(v, _mm256_loadu2_m128i((const __m128i *)(q + 3 * IQ1_BLOCK_BYTES),
                                                      (const __m128i *)(q + 2 * IQ1_BLOCK_BYTES)), 1);
    tr_digits5_512(v, c);
}

AVX512_TARGET static void iq1_rows_avx512(const tsar_acts *s, int32_t *out, int m0, int m1) {
    tr_rows_avx512(s, out, m0, m1, iq1_decode512, 5, iq1_row_bytes(s->w), steps(s->w));
}

const tsar_kernel tsar_kernel_iq2_bn = {
    .row_unit = 1, .prep_size = iq2_prep_size, .prep = iq2_prep,
    .rows = {[TSAR_ISA_AVX2] = iq2_rows_avx2, [TSAR_ISA_AVX512] = iq2_rows_avx512,
             [TSAR_ISA_AVXVNNI] = iq2_rows_avxvnni}, .check = check};
const tsar_kernel tsar_kernel_iq1_bn = {
    .row_unit = 1, .prep_size = iq1_prep_size, .prep = iq1_prep,
    .rows = {[TSAR_ISA_AVX2] = iq1_rows_avx2, [TSAR_ISA_AVX512] = iq1_rows_avx512,
             [TSAR_ISA_AVXVNNI] = iq1_rows_avxvnni}, .check = check};
#else
TSAR_SIM_PREP_SUM(iq2_bn, check, iq2_prep_size, iq2_prep, iq2_rows_avx2)
TSAR_SIM_PREP_SUM(iq2_bn_avxvnni, check, iq2_prep_size, iq2_prep, iq2_rows_avxvnni)
TSAR_SIM_PREP_SUM(iq1_bn, check, iq1_prep_size, iq1_prep, iq1_rows_avx2)
TSAR_SIM_PREP_SUM(iq1_bn_avxvnni, check, iq1_prep_size, iq1_prep, iq1_rows_avxvnni)
#endif
