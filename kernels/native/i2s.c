/* I2_S GEMV/GEMM on bitnet.cpp's I2_S layout (see tsar/kernels/formats/i2s.py): codes c = w + 1.
 *
 * Computes sum(c * a) - sum(a). A 32-byte block vector v holds 4 fields; we split it with one shift:
 * v & 3 (columns 96..127), (v >> 4) & 3 (32..63), and the x4-scaled v & 0xC (64..95),
 * (v >> 4) & 0xC (0..31). pmaddubsw (u8 codes x s8 activations) gives int16 pair sums of at most
 * 2*2*127 (unscaled) or 2*8*127 (scaled); two per block and accumulator, widened every 8 blocks
 * (|sum| <= 8*2*2032 = 32512), so nothing wraps (bitnet.cpp widens every 32 blocks and wraps).
 * AVX-VNNI: vpdpbusd into int32 (below). */
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

/* AVX-VNNI (VEX vpdpbusd ymm): one row and token at a time as the AVX2 path, each vpmaddubsw +
 * vpaddw replaced by one vpdpbusd (codes unsigned, activations signed) into int32, so no widening
 * window. Each of a block's four fields has its own accumulator and two blocks are in flight, so
 * eight independent chains cover vpdpbusd's ~5-cycle latency (the four of one block alone would
 * leave it half idle); fields of the x4-scaled codes stay in their own chains (acc[b][2], [3]).
 * block_avxvnni: block b of a row into the four accumulators acc[0..4). */
AVXVNNI_TARGET static inline __attribute__((always_inline)) void block_avxvnni(
        const uint8_t *w, const int8_t *a, int b, __m256i acc[4]) {
    const __m256i m3 = _mm256_set1_epi8(0x03), mc = _mm256_set1_epi8(0x0c);
    const __m256i *ap = (const __m256i *)(a + 128 * b);
    const __m256i v = _mm256_loadu_si256((const __m256i *)(w + 32 * b));
    const __m256i h = _mm256_srli_epi16(v, 4);
    acc[0] = tsar_dpbusd_avx(acc[0], _mm256_and_si256(v, m3), _mm256_loadu_si256(ap + 3));
    acc[1] = tsar_dpbusd_avx(acc[1], _mm256_and_si256(h, m3), _mm256_loadu_si256(ap + 1));
    acc[2] = tsar_dpbusd_avx(acc[2], _mm256_and_si256(v, mc), _mm256_loadu_si256(ap + 2));
    acc[3] = tsar_dpbusd_avx(acc[3], _mm256_and_si256(h, mc), _mm256_loadu_si256(ap));
}

AVXVNNI_TARGET static inline int32_t row_avxvnni(const uint8_t *w, const int8_t *a, int nb) {
    __m256i acc[2][4];
    for (int b = 0; b < 2; b++)
        for (int f = 0; f < 4; f++) acc[b][f] = _mm256_setzero_si256();
    int b = 0;
    for (; b + 2 <= nb; b += 2) {
        block_avxvnni(w, a, b, acc[0]);
        block_avxvnni(w, a, b + 1, acc[1]);
    }
    if (b < nb) block_avxvnni(w, a, b, acc[0]);   /* an odd last block */
    const __m256i s1 = _mm256_add_epi32(_mm256_add_epi32(acc[0][0], acc[0][1]), _mm256_add_epi32(acc[1][0], acc[1][1]));
    const __m256i s4 = _mm256_add_epi32(_mm256_add_epi32(acc[0][2], acc[0][3]), _mm256_add_epi32(acc[1][2], acc[1][3]));
    return tsar_hsum_epi32(s1) + (tsar_hsum_epi32(s4) >> 2);   /* s4 holds 4 * its sum */
}

AVXVNNI_TARGET static void rows_avxvnni(const tsar_acts *s, int32_t *out, int m0, int m1) {
    const tsar_weights *w = s->w;
    const size_t rstride = (size_t)w->k / 4;
    const int nb = w->k / 128;
    for (int r = m0; r < m1; r++)
        for (int t = 0; t < s->n; t++)
            out[(size_t)t * w->m + r] = row_avxvnni(w->w + r * rstride, s->act + s->act_stride * t, nb)
                                        - s->sums[t];
}

#ifndef TSAR_SIM
const tsar_kernel tsar_kernel_i2s = {
    .row_unit = ROWS, .prep_size = prep_size, .prep = prep,
    .rows = {[TSAR_ISA_AVX2] = rows_avx2, [TSAR_ISA_AVXVNNI] = rows_avxvnni}, .check = check};
#else
TSAR_SIM_SUM_GEMV(i2s)
TSAR_SIM_SUM_ENTRIES(i2s_avxvnni, rows_avxvnni)
#endif
