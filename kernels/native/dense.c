/* Dense int8 GEMV/GEMM: weights int8 (M, K) row-major with |w| <= 64, per-row sums in aux.
 * Activations are offset to u8 (a + 128) once per token, so pmaddubsw / vpdpbusd take them as the
 * unsigned operand; the result is sum((a + 128) * w) - 128 * rowsum(w). AVX2 accumulates int16 pair
 * sums for 'bk' steps (chosen at pack time so that bk * 2 * 255 * max|w| <= 32767), then widens. */
#include "common.h"

/* GEMV one row at a time: interleaved row streams defeat the hardware prefetcher from DRAM. */
#ifndef ROWS
#define ROWS 1
#endif

static int check(const tsar_weights *w) { return w->k % 64 != 0 || w->bk < 1 || !w->aux; }
static size_t prep_size(const tsar_weights *w) { return (size_t)w->k; }

static void prep(const tsar_acts *s, int t) {
    const int8_t *a = s->act + s->act_stride * t;
    uint8_t *u = s->prep + s->prep_stride * t;
    const __m256i off = _mm256_set1_epi8((char)0x80);
    for (int i = 0; i < s->w->k; i += 32)
        _mm256_store_si256((__m256i *)(u + i), _mm256_xor_si256(_mm256_load_si256((const __m256i *)(a + i)), off));
}

static void rows_avx2(const tsar_acts *s, int32_t *out, int m0, int m1) {
    const tsar_weights *w = s->w;
    const size_t K = (size_t)w->k;
    const int steps = w->k / 32, flush = w->bk;
    const __m256i one = _mm256_set1_epi16(1);
    for (int r = m0; r < m1; r += ROWS) {
        const int R = m1 - r < ROWS ? m1 - r : ROWS;
        for (int t = 0; t < s->n; t++) {
            const uint8_t *u = s->prep + s->prep_stride * t;
            __m256i acc[ROWS];
            for (int i = 0; i < ROWS; i++) acc[i] = _mm256_setzero_si256();
            for (int j0 = 0; j0 < steps; j0 += flush) {
                const int j1 = j0 + flush < steps ? j0 + flush : steps;
                __m256i s16[ROWS];
                for (int i = 0; i < ROWS; i++) s16[i] = _mm256_setzero_si256();
                for (int j = j0; j < j1; j++) {
                    const __m256i x = _mm256_load_si256((const __m256i *)(u + 32 * j));
                    for (int i = 0; i < ROWS; i++) {
                        if (i >= R) break;
                        const __m256i wv = _mm256_loadu_si256((const __m256i *)(w->w + (r + i) * K + 32 * j));
                        s16[i] = _mm256_add_epi16(s16[i], _mm256_maddubs_epi16(x, wv));
                    }
                }
                for (int i = 0; i < ROWS; i++) acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(s16[i], one));
            }
            for (int i = 0; i < R; i++)
                out[(size_t)t * w->m + r + i] = tsar_hsum_epi32(acc[i]) - 128 * w->aux[r + i];
        }
    }
}

/* GEMM micro-kernel, AVX-512 VNNI: nr (<= 4) rows x nt (<= 4) tokens per pass over K, so each
 * loaded weight vector serves nt tokens and each activation vector nr rows; the 16 independent
 * vpdpbusd chains hide its latency (one chain per row, as the GEMV has, is latency-bound). */
AVX512_TARGET static inline __attribute__((always_inline)) void tile_avx512(
        const tsar_acts *s, int32_t *out, int r, int t, int nr, int nt) {
    const tsar_weights *w = s->w;
    const size_t K = (size_t)w->k;
    __m512i acc[4][4];
    const uint8_t *u[4];
    for (int i = 0; i < 4; i++)
        for (int q = 0; q < 4; q++) acc[i][q] = _mm512_setzero_si512();
    for (int q = 0; q < 4; q++) u[q] = s->prep + s->prep_stride * (t + (q < nt ? q : 0));
    for (size_t j = 0; j < K; j += 64) {
        __m512i x[4];
        for (int q = 0; q < nt; q++) x[q] = _mm512_load_si512((const void *)(u[q] + j));
        for (int i = 0; i < nr; i++) {
            const __m512i wv = _mm512_loadu_si512((const void *)(w->w + (r + i) * K + j));
            for (int q = 0; q < nt; q++) acc[i][q] = _mm512_dpbusd_epi32(acc[i][q], x[q], wv);
        }
    }
    for (int i = 0; i < nr; i++)
        for (int q = 0; q < nt; q++)
            out[(size_t)(t + q) * w->m + r + i] = _mm512_reduce_add_epi32(acc[i][q]) - 128 * w->aux[r + i];
}

AVX512_TARGET static void rows_avx512(const tsar_acts *s, int32_t *out, int m0, int m1) {
    const tsar_weights *w = s->w;
    const size_t K = (size_t)w->k;
    if (s->n > 1) {  /* GEMM: 4 x 4 tiles (rows stay in L1/L2 while the tokens stream) */
        for (int r = m0; r < m1; r += 4) {
            const int nr = m1 - r < 4 ? m1 - r : 4;
            int t = 0;
            for (; t + 4 <= s->n; t += 4) {
                if (nr == 4) tile_avx512(s, out, r, t, 4, 4);
                else tile_avx512(s, out, r, t, nr, 4);
            }
            for (; t < s->n; t++) {
                if (nr == 4) tile_avx512(s, out, r, t, 4, 1);
                else tile_avx512(s, out, r, t, nr, 1);
            }
        }
        return;
    }
    for (int r = m0; r < m1; r += ROWS) {
        const int R = m1 - r < ROWS ? m1 - r : ROWS;
        for (int t = 0; t < s->n; t++) {
            const uint8_t *u = s->prep + s->prep_stride * t;
            __m512i acc[ROWS];
            for (int i = 0; i < ROWS; i++) acc[i] = _mm512_setzero_si512();
            for (size_t j = 0; j < K; j += 64) {
                const __m512i x = _mm512_load_si512((const void *)(u + j));
                for (int i = 0; i < ROWS; i++) {
                    if (i >= R) break;
                    acc[i] = _mm512_dpbusd_epi32(acc[i], x, _mm512_loadu_si512((const void *)(w->w + (r + i) * K + j)));
                }
            }
            for (int i = 0; i < R; i++)
                out[(size_t)t * w->m + r + i] = _mm512_reduce_add_epi32(acc[i]) - 128 * w->aux[r + i];
        }
    }
}

const tsar_kernel tsar_kernel_dense = {
    .row_unit = ROWS, .prep_size = prep_size, .prep = prep, .rows = {NULL, rows_avx2, rows_avx512},
    .check = check};
