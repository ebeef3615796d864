/* I2_S GEMV/GEMM on bitnet.cpp's I2_S layout (see tsar/kernels/formats/i2s.py): codes c = w + 1.
 *
 * Computes sum(c * a) - sum(a). A 32-byte block vector v holds 4 fields; we split it with one shift:
 * v & 3 (columns 96..127), (v >> 4) & 3 (32..63), and the x4-scaled v & 0xC (64..95),
 * (v >> 4) & 0xC (0..31). pmaddubsw (u8 codes x s8 activations) gives int16 pair sums of at most
 * 2*2*127 (unscaled) or 2*8*127 (scaled); two per block and accumulator, widened every 8 blocks
 * (|sum| <= 8*2*2032 = 32512), so nothing wraps (bitnet.cpp widens every 32 blocks and wraps). */
#include "common.h"

/* One row at a time: several interleaved row streams defeat the hardware prefetcher from DRAM
 * (measured here: 4 rows ~55 Gop/s, 1 row ~150 Gop/s at 2560 x 2560); activations come from L1. */
#ifndef ROWS
#define ROWS 1
#endif
#define FLUSH 8

static int check(const tsar_weights *w) { return w->k % 128 != 0; }
static size_t prep_size(const tsar_weights *w) { (void)w; return 0; }
static void prep(const tsar_acts *s, int t) { (void)s; (void)t; }

/* R rows starting at row r, one token; returns sums of c*a in res[0..R). */
static inline void rows_block(const uint8_t *w, size_t rstride, const int8_t *a, int nb, int R, int32_t *res) {
    const __m256i m3 = _mm256_set1_epi8(0x03), mc = _mm256_set1_epi8(0x0c);
    const __m256i one = _mm256_set1_epi16(1), four = _mm256_set1_epi16(4);
    __m256i acc[ROWS];
    for (int r = 0; r < ROWS; r++) acc[r] = _mm256_setzero_si256();
    for (int b0 = 0; b0 < nb; b0 += FLUSH) {
        __m256i s1[ROWS], s4[ROWS];
        for (int r = 0; r < ROWS; r++) s1[r] = s4[r] = _mm256_setzero_si256();
        const int b1 = b0 + FLUSH < nb ? b0 + FLUSH : nb;
        for (int b = b0; b < b1; b++) {
            const __m256i *ap = (const __m256i *)(a + 128 * b);
            const __m256i x0 = _mm256_loadu_si256(ap), x1 = _mm256_loadu_si256(ap + 1);
            const __m256i x2 = _mm256_loadu_si256(ap + 2), x3 = _mm256_loadu_si256(ap + 3);
            for (int r = 0; r < ROWS; r++) {
                if (r >= R) break;
                const __m256i v = _mm256_loadu_si256((const __m256i *)(w + r * rstride + 32 * b));
                const __m256i h = _mm256_srli_epi16(v, 4);
                s1[r] = _mm256_add_epi16(s1[r], _mm256_add_epi16(
                    _mm256_maddubs_epi16(_mm256_and_si256(v, m3), x3),
                    _mm256_maddubs_epi16(_mm256_and_si256(h, m3), x1)));
                s4[r] = _mm256_add_epi16(s4[r], _mm256_add_epi16(
                    _mm256_maddubs_epi16(_mm256_and_si256(v, mc), x2),
                    _mm256_maddubs_epi16(_mm256_and_si256(h, mc), x0)));
            }
        }
        for (int r = 0; r < ROWS; r++)
            acc[r] = _mm256_add_epi32(acc[r], _mm256_add_epi32(_mm256_madd_epi16(s1[r], four),
                                                               _mm256_madd_epi16(s4[r], one)));
    }
    for (int r = 0; r < R; r++) res[r] = tsar_hsum_epi32(acc[r]) >> 2;   /* acc holds 4 * sum */
}

static void rows_avx2(const tsar_acts *s, int32_t *out, int m0, int m1) {
    const tsar_weights *w = s->w;
    const size_t rstride = (size_t)w->k / 4;
    const int nb = w->k / 128;
    int32_t res[ROWS];
    for (int r = m0; r < m1; r += ROWS) {
        const int R = m1 - r < ROWS ? m1 - r : ROWS;
        for (int t = 0; t < s->n; t++) {
            rows_block(w->w + r * rstride, rstride, s->act + s->act_stride * t, nb, R, res);
            for (int i = 0; i < R; i++) out[(size_t)t * w->m + r + i] = res[i] - s->sums[t];
        }
    }
}

#ifndef TSAR_SIM
const tsar_kernel tsar_kernel_i2s = {
    .row_unit = ROWS, .prep_size = prep_size, .prep = prep, .rows = {NULL, rows_avx2, NULL}, .check = check};
#else
TSAR_SIM_SUM_GEMV(i2s)
#endif
