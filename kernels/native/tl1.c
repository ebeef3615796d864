/* TL1 GEMV/GEMM on bitnet.cpp's TL1 layout with bm = 32 (by = 8; see tsar/kernels/formats/tl1.py).
 *
 * Per token and 8 columns (pairs P0..P3), 128 bytes of tables: [lo T_P0 | lo T_P2], [hi T_P0 | hi T_P2],
 * [lo T_P1 | lo T_P3], [hi T_P1 | hi T_P3], where T_P[i] = (i/3-1)*a0 + (i%3-1)*a1 (i = 0..8). A
 * 32-byte weight vector holds 16 rows x 8 columns (lane 0: pairs 0/1, lane 1: pairs 2/3), so one
 * pshufb per nibble and byte plane serves both lanes. int16 sums are widened every BK block
 * (BK/8 * 2 * 254 <= 32512 for BK <= 512). */
#include "common.h"

static int check(const tsar_weights *w) {
    if (w->bm <= 0 || w->bm % 32 || w->bm > 512 || w->m % w->bm) return 1;
    return w->bk <= 0 || w->bk % 8 || w->bk > 512 || w->k % w->bk;
}

static size_t prep_size(const tsar_weights *w) { return (size_t)w->k * 16; }

static void prep(const tsar_acts *s, int t) {
    const int8_t *a = s->act + s->act_stride * t;
    uint8_t *lut = s->prep + s->prep_stride * t;
    const __m256i sh = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15,
                                        0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    const __m256i e0 = _mm256_setr_epi16(-1, -1, -1, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0);
    const __m256i e1 = _mm256_setr_epi16(-1, 0, 1, -1, 0, 1, -1, 0, 1, 0, 0, 0, 0, 0, 0, 0);
    for (int b = 0; b < s->w->k / 8; b++) {
        __m256i tp[4];
        for (int p = 0; p < 4; p++) {
            const int8_t *q = a + 8 * b + 2 * p;
            __m256i v = _mm256_add_epi16(_mm256_sign_epi16(_mm256_set1_epi16(q[0]), e0),
                                         _mm256_sign_epi16(_mm256_set1_epi16(q[1]), e1));
            tp[p] = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(v, sh), 0xd8);  /* [lo16][hi16] */
        }
        __m256i *o = (__m256i *)(lut + 128 * b);
        _mm256_store_si256(o + 0, _mm256_permute2x128_si256(tp[0], tp[2], 0x20));
        _mm256_store_si256(o + 1, _mm256_permute2x128_si256(tp[0], tp[2], 0x31));
        _mm256_store_si256(o + 2, _mm256_permute2x128_si256(tp[1], tp[3], 0x20));
        _mm256_store_si256(o + 3, _mm256_permute2x128_si256(tp[1], tp[3], 0x31));
    }
}

static inline void add_lanes(int32_t *acc, __m256i c) {   /* rows in both lanes: fold them */
    __m256i v = _mm256_add_epi32(_mm256_cvtepi16_epi32(_mm256_castsi256_si128(c)),
                                 _mm256_cvtepi16_epi32(_mm256_extracti128_si256(c, 1)));
    _mm256_storeu_si256((__m256i *)acc, _mm256_add_epi32(_mm256_loadu_si256((__m256i *)acc), v));
}

static void rows_avx2(const tsar_acts *s, int32_t *out, int m0, int m1) {
    const tsar_weights *w = s->w;
    const int bm = w->bm, bk = w->bk, kbn = w->k / bk, tiles = bm / 32, ny = bk / 8;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    int32_t acc[512] __attribute__((aligned(64)));
    for (int mb = m0 / bm; mb < m1 / bm; mb++) {
        for (int t = 0; t < s->n; t++) {
            const uint8_t *lut = s->prep + s->prep_stride * t;
            for (int i = 0; i < bm; i++) acc[i] = 0;
            for (int kb = 0; kb < kbn; kb++) {
                const uint8_t *wb = w->w + ((size_t)mb * kbn + kb) * (size_t)bm * bk / 4;
                const uint8_t *lb = lut + (size_t)kb * ny * 128;
                for (int c = 0; c < tiles; c++) {
                    const uint8_t *wp = wb + (size_t)c * ny * 64;
                    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
                    for (int y = 0; y < ny; y++) {
                        const __m256i *l = (const __m256i *)(lb + 128 * y);
                        const __m256i tl = _mm256_load_si256(l), th = _mm256_load_si256(l + 1);
                        const __m256i bl = _mm256_load_si256(l + 2), bh = _mm256_load_si256(l + 3);
#define TL1_HALF(U, ACC_LO, ACC_HI)                                                              \
                        {                                                                        \
                            const __m256i wv = _mm256_loadu_si256((const __m256i *)(wp + 64 * y + 32 * U)); \
                            const __m256i top = _mm256_and_si256(_mm256_srli_epi16(wv, 4), m4);  \
                            const __m256i bot = _mm256_and_si256(wv, m4);                        \
                            const __m256i tf = _mm256_shuffle_epi8(tl, top), ts = _mm256_shuffle_epi8(th, top); \
                            const __m256i bf = _mm256_shuffle_epi8(bl, bot), bs = _mm256_shuffle_epi8(bh, bot); \
                            ACC_LO = _mm256_add_epi16(ACC_LO, _mm256_add_epi16(_mm256_unpacklo_epi8(tf, ts), \
                                                                               _mm256_unpacklo_epi8(bf, bs))); \
                            ACC_HI = _mm256_add_epi16(ACC_HI, _mm256_add_epi16(_mm256_unpackhi_epi8(tf, ts), \
                                                                               _mm256_unpackhi_epi8(bf, bs))); \
                        }
                        TL1_HALF(0, a0, a1)
                        TL1_HALF(1, a2, a3)
#undef TL1_HALF
                    }
                    add_lanes(acc + 32 * c, a0);
                    add_lanes(acc + 32 * c + 8, a1);
                    add_lanes(acc + 32 * c + 16, a2);
                    add_lanes(acc + 32 * c + 24, a3);
                }
            }
            int32_t *o = out + (size_t)t * w->m + (size_t)mb * bm;
            for (int i = 0; i < bm; i++) o[i] = acc[i];
        }
    }
}

#ifndef TSAR_SIM
const tsar_kernel tsar_kernel_tl1 = {
    .row_unit = 0, .prep_size = prep_size, .prep = prep, .rows = {NULL, rows_avx2, NULL}, .check = check};
#else
TSAR_SIM_LUT_GEMV(tl1)
#endif
