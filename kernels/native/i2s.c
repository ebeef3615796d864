/* I2_S GEMV/GEMM on bitnet.cpp's I2_S layout (see tsar/kernels/formats/i2s.py): codes c = w + 1.
 *
 * Computes sum(c * a) - sum(a). A 32-byte block vector v holds 4 fields; we split it with one shift:
 * v & 3 (columns 96..127), (v >> 4) & 3 (32..63), and the x4-scaled v & 0xC (64..95),
 * (v >> 4) & 0xC (0..31). pmaddubsw (u8 codes x s8 activations) gives int16 pair sums of at most
 * 2*2*127 (unscaled) or 2*8*127 (scaled); two per block and accumulator, widened every 8 blocks
 * (|sum| <= 8*2*2032 = 32512), so nothing wraps (bitnet.cpp widens every 32 blocks and wraps).
 * AVX-VNNI and AVX-512: vpdpbusd into int32 (below). */
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

/* AVX-512 (VNNI, BW): a 32-byte block broadcast to both halves of a zmm register and masked
 * in place, no shift: v & (0xC0 | 0x30) holds the codes of columns 0..31 | 32..63 scaled by 64 | 16,
 * v & (0x0C | 0x03) those of 64..95 | 96..127 scaled by 4 | 1, so each matches 64 contiguous
 * activation bytes. Accumulators keep the scales (multiples of them, |lane| <= 4*192*127 per
 * block) and the row's end divides them out exactly with one vpsravd per accumulator. Up to two
 * tokens share each decoded block; two blocks are in flight (four chains per token). On cores
 * that issue zmm vpdpbusd on one port, it takes two of them per block, the masks the others.
 * block_avx512: block b of a row into acc[u][0..2) for tokens u < ntok. */
#define I2S_TOKENS 2   /* rows_avx512 below handles the one odd token for this value */
AVX512_TARGET static inline __attribute__((always_inline)) void block_avx512(
        const uint8_t *w, const int8_t *const *a, int ntok, int b, __m512i acc[][2]) {
    const __m512i high = _mm512_inserti64x4(_mm512_set1_epi8((char)0xc0), _mm256_set1_epi8(0x30), 1);
    const __m512i low = _mm512_inserti64x4(_mm512_set1_epi8(0x0c), _mm256_set1_epi8(0x03), 1);
    const __m512i v = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(w + 32 * b)));
    const __m512i x = _mm512_and_si512(v, high), y = _mm512_and_si512(v, low);
    for (int u = 0; u < ntok; u++) {
        const int8_t *ap = a[u] + 128 * b;
        acc[u][0] = _mm512_dpbusd_epi32(acc[u][0], x, _mm512_loadu_si512((const void *)ap));
        acc[u][1] = _mm512_dpbusd_epi32(acc[u][1], y, _mm512_loadu_si512((const void *)(ap + 64)));
    }
}

/* One row for ntok (1..I2S_TOKENS) tokens from t into out. */
AVX512_TARGET static inline __attribute__((always_inline)) void row_avx512(
        const tsar_acts *s, int32_t *out, int r, int t, int ntok) {
    const tsar_weights *w = s->w;
    const uint8_t *wr = w->w + (size_t)r * (w->k / 4);
    const int nb = w->k / 128;
    const __m512i shift_high = _mm512_inserti64x4(_mm512_set1_epi32(6), _mm256_set1_epi32(4), 1);
    const __m512i shift_low = _mm512_inserti64x4(_mm512_set1_epi32(2), _mm256_setzero_si256(), 1);
    const int8_t *a[I2S_TOKENS];
    __m512i acc[2][I2S_TOKENS][2];
    for (int u = 0; u < I2S_TOKENS; u++) {
        a[u] = s->act + s->act_stride * (t + (u < ntok ? u : 0));
        for (int c = 0; c < 2; c++) acc[c][u][0] = acc[c][u][1] = _mm512_setzero_si512();
    }
    int b = 0;
    for (; b + 2 <= nb; b += 2) {
        block_avx512(wr, a, ntok, b, acc[0]);
        block_avx512(wr, a, ntok, b + 1, acc[1]);
    }
    if (b < nb) block_avx512(wr, a, ntok, b, acc[0]);   /* an odd last block */
    for (int u = 0; u < ntok; u++) {
        const __m512i hi = _mm512_srav_epi32(_mm512_add_epi32(acc[0][u][0], acc[1][u][0]), shift_high);
        const __m512i lo = _mm512_srav_epi32(_mm512_add_epi32(acc[0][u][1], acc[1][u][1]), shift_low);
        out[(size_t)(t + u) * w->m + r] = _mm512_reduce_add_epi32(_mm512_add_epi32(hi, lo)) - s->sums[t + u];
    }
}

AVX512_TARGET static void rows_avx512(const tsar_acts *s, int32_t *out, int m0, int m1) {
    for (int r = m0; r < m1; r++) {
        int t = 0;
        for (; t + I2S_TOKENS <= s->n; t += I2S_TOKENS) row_avx512(s, out, r, t, I2S_TOKENS);
        if (t < s->n) row_avx512(s, out, r, t, 1);   /* constant counts keep acc in registers */
    }
}

#ifndef TSAR_SIM
const tsar_kernel tsar_kernel_i2s = {
    .row_unit = ROWS, .prep_size = prep_size, .prep = prep,
    .rows = {[TSAR_ISA_AVX2] = rows_avx2, [TSAR_ISA_AVX512] = rows_avx512, [TSAR_ISA_AVXVNNI] = rows_avxvnni},
    .check = check};
#else
TSAR_SIM_SUM_GEMV(i2s)
TSAR_SIM_SUM_ENTRIES(i2s_avxvnni, rows_avxvnni)
TSAR_SIM_SUM_ENTRIES(i2s_avx512, rows_avx512)
#endif
