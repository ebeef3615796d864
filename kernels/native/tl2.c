/* TL2 GEMV/GEMM on bitnet.cpp's TL2 layout (see tsar/kernels/formats/tl2.py).
 *
 * Per token, a table per 3 activations: 16 int16 entries T[i] = d0*a0 + d1*a1 + d2*a2 for the
 * balanced-ternary digits of i = 9*d0 + 3*d1 + d2 (i = 0..13; 14, 15 are 0), stored as 32 bytes
 * [16 low bytes][16 high bytes]; a table per 2 tail activations: T[i] = (i/3-1)*a0 + (i%3-1)*a1
 * (i = 0..8). The kernel looks both bytes up with pshufb, interleaves them into int16, applies the
 * sign with psignw, and accumulates in int16 for one BK block (32 groups, |sum| <= 32*381) before
 * widening to int32, so nothing wraps. */
#include "common.h"

#define TAILK 32

static inline int k3_of(const tsar_weights *w) { return w->k - w->k % w->bk; }

static int check(const tsar_weights *w) {
    if (w->bm <= 0 || w->bm % 32 || w->bm > 512 || w->m % w->bm) return 1;
    if (w->bk <= 0 || w->bk % 24 || w->bk > 2400) return 1;
    return (w->k - k3_of(w)) % TAILK != 0;
}

static size_t prep_size(const tsar_weights *w) {
    return (size_t)k3_of(w) / 3 * 32 + (size_t)(w->k - k3_of(w)) / 2 * 32;
}

/* 16 int16 lanes -> [lo bytes][hi bytes] */
static inline __m256i split_bytes(__m256i t) {
    const __m256i sh = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15,
                                        0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    return _mm256_permute4x64_epi64(_mm256_shuffle_epi8(t, sh), 0xd8);
}

static void prep(const tsar_acts *s, int t) {
    const tsar_weights *w = s->w;
    const int8_t *a = s->act + s->act_stride * t;
    uint8_t *lut = s->prep + s->prep_stride * t;
    const int k3 = k3_of(w);
    /* digit vectors of i = 0..15 */
    const __m256i d0 = _mm256_setr_epi16(0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0);
    const __m256i d1 = _mm256_setr_epi16(0, 0, 1, 1, 1, -1, -1, -1, 0, 0, 0, 1, 1, 1, 0, 0);
    const __m256i d2 = _mm256_setr_epi16(0, 1, -1, 0, 1, -1, 0, 1, -1, 0, 1, -1, 0, 1, 0, 0);
    for (int g = 0; g < k3 / 3; g++) {
        __m256i v = _mm256_sign_epi16(_mm256_set1_epi16(a[3 * g]), d0);
        v = _mm256_add_epi16(v, _mm256_sign_epi16(_mm256_set1_epi16(a[3 * g + 1]), d1));
        v = _mm256_add_epi16(v, _mm256_sign_epi16(_mm256_set1_epi16(a[3 * g + 2]), d2));
        _mm256_store_si256((__m256i *)(lut + 32 * g), split_bytes(v));
    }
    const __m256i e0 = _mm256_setr_epi16(-1, -1, -1, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0);
    const __m256i e1 = _mm256_setr_epi16(-1, 0, 1, -1, 0, 1, -1, 0, 1, 0, 0, 0, 0, 0, 0, 0);
    uint8_t *tl = lut + (size_t)k3 / 3 * 32;
    for (int p = 0; p < (w->k - k3) / 2; p++) {
        __m256i v = _mm256_sign_epi16(_mm256_set1_epi16(a[k3 + 2 * p]), e0);
        v = _mm256_add_epi16(v, _mm256_sign_epi16(_mm256_set1_epi16(a[k3 + 2 * p + 1]), e1));
        _mm256_store_si256((__m256i *)(tl + 32 * p), split_bytes(v));
    }
}

static inline __m256i bcast(const uint8_t *p) { return _mm256_broadcastsi128_si256(_mm_load_si128((const __m128i *)p)); }

static inline void add_wide(int32_t *acc, __m256i c) {
    __m256i lo = _mm256_cvtepi16_epi32(_mm256_castsi256_si128(c));
    __m256i hi = _mm256_cvtepi16_epi32(_mm256_extracti128_si256(c, 1));
    _mm256_storeu_si256((__m256i *)acc, _mm256_add_epi32(_mm256_loadu_si256((__m256i *)acc), lo));
    _mm256_storeu_si256((__m256i *)(acc + 8), _mm256_add_epi32(_mm256_loadu_si256((__m256i *)(acc + 8)), hi));
}

/* One 32-row tile over one BK block: 'nv' weight vectors (two groups each), 'nv/4' sign vectors. */
static inline void tile3(const uint8_t *wp, const uint8_t *sp, const uint8_t *lut, int nv, int32_t *acc) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), one = _mm256_set1_epi16(1);
    __m256i c0 = _mm256_setzero_si256(), c1 = _mm256_setzero_si256();
    for (int s = 0; s < nv / 4; s++) {
        const __m256i sv = _mm256_loadu_si256((const __m256i *)(sp + 32 * s));
#define TL2_STEP(J)                                                                              \
        {                                                                                        \
            const __m256i wv = _mm256_loadu_si256((const __m256i *)(wp + 32 * (4 * s + J)));     \
            const __m256i top = _mm256_and_si256(_mm256_srli_epi16(wv, 4), m4);                  \
            const __m256i bot = _mm256_and_si256(wv, m4);                                        \
            const uint8_t *l = lut + 64 * (4 * s + J);                                           \
            const __m256i tf = _mm256_shuffle_epi8(bcast(l), top);                               \
            const __m256i ts = _mm256_shuffle_epi8(bcast(l + 16), top);                          \
            const __m256i bf = _mm256_shuffle_epi8(bcast(l + 32), bot);                          \
            const __m256i bs = _mm256_shuffle_epi8(bcast(l + 48), bot);                          \
            __m256i t0 = _mm256_unpacklo_epi8(tf, ts), t1 = _mm256_unpackhi_epi8(tf, ts);       \
            __m256i b0 = _mm256_unpacklo_epi8(bf, bs), b1 = _mm256_unpackhi_epi8(bf, bs);       \
            t0 = _mm256_sign_epi16(t0, _mm256_or_si256(_mm256_slli_epi16(sv, 4 * J), one));     \
            t1 = _mm256_sign_epi16(t1, _mm256_or_si256(_mm256_slli_epi16(sv, 4 * J + 1), one)); \
            b0 = _mm256_sign_epi16(b0, _mm256_or_si256(_mm256_slli_epi16(sv, 4 * J + 2), one)); \
            b1 = _mm256_sign_epi16(b1, _mm256_or_si256(_mm256_slli_epi16(sv, 4 * J + 3), one)); \
            c0 = _mm256_add_epi16(c0, _mm256_add_epi16(t0, b0));                                 \
            c1 = _mm256_add_epi16(c1, _mm256_add_epi16(t1, b1));                                 \
        }
        TL2_STEP(0) TL2_STEP(1) TL2_STEP(2) TL2_STEP(3)
#undef TL2_STEP
    }
    add_wide(acc, c0);
    add_wide(acc + 16, c1);
}

/* One 32-row tile over one 32-column tail block: 8 vectors, signed 9-entry tables. */
static inline void tile2(const uint8_t *wp, const uint8_t *lut, int32_t *acc) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256i c0 = _mm256_setzero_si256(), c1 = _mm256_setzero_si256();
    for (int j = 0; j < 8; j++) {
        const __m256i wv = _mm256_loadu_si256((const __m256i *)(wp + 32 * j));
        const __m256i top = _mm256_and_si256(_mm256_srli_epi16(wv, 4), m4);
        const __m256i bot = _mm256_and_si256(wv, m4);
        const uint8_t *l = lut + 64 * j;
        const __m256i tf = _mm256_shuffle_epi8(bcast(l), top), ts = _mm256_shuffle_epi8(bcast(l + 16), top);
        const __m256i bf = _mm256_shuffle_epi8(bcast(l + 32), bot), bs = _mm256_shuffle_epi8(bcast(l + 48), bot);
        c0 = _mm256_add_epi16(c0, _mm256_add_epi16(_mm256_unpacklo_epi8(tf, ts), _mm256_unpacklo_epi8(bf, bs)));
        c1 = _mm256_add_epi16(c1, _mm256_add_epi16(_mm256_unpackhi_epi8(tf, ts), _mm256_unpackhi_epi8(bf, bs)));
    }
    add_wide(acc, c0);
    add_wide(acc + 16, c1);
}

static void rows_avx2(const tsar_acts *s, int32_t *out, int m0, int m1) {
    const tsar_weights *w = s->w;
    const int bm = w->bm, bk = w->bk, k3 = k3_of(w), kb3 = k3 / bk, kbt = (w->k - k3) / TAILK;
    const int tiles = bm / 32, nv = bk / 6;
    const size_t m = (size_t)w->m;
    const uint8_t *idx = w->w, *sign = w->w + m * k3 / 6, *tail = sign + m * k3 / 24;
    int32_t acc[512] __attribute__((aligned(64)));
    for (int mb = m0 / bm; mb < m1 / bm; mb++) {
        for (int t = 0; t < s->n; t++) {
            const uint8_t *lut = s->prep + s->prep_stride * t, *lut2 = lut + (size_t)k3 / 3 * 32;
            for (int i = 0; i < bm; i++) acc[i] = 0;
            for (int kb = 0; kb < kb3; kb++) {
                const size_t blk = (size_t)mb * kb3 + kb;
                for (int c = 0; c < tiles; c++)
                    tile3(idx + (blk * tiles + c) * nv * 32, sign + (blk * tiles + c) * (nv / 4) * 32,
                          lut + (size_t)kb * bk / 3 * 32, nv, acc + 32 * c);
            }
            for (int kb = 0; kb < kbt; kb++) {
                const size_t blk = (size_t)mb * kbt + kb;
                for (int c = 0; c < tiles; c++)
                    tile2(tail + (blk * tiles + c) * 256, lut2 + (size_t)kb * 16 * 32, acc + 32 * c);
            }
            int32_t *o = out + (size_t)t * m + (size_t)mb * bm;
            for (int i = 0; i < bm; i++) o[i] = acc[i];
        }
    }
}

#ifndef TSAR_SIM
const tsar_kernel tsar_kernel_tl2 = {
    .row_unit = 0, .prep_size = prep_size, .prep = prep, .rows = {NULL, rows_avx2, NULL}, .check = check};
#else
TSAR_SIM_LUT_GEMV(tl2)
#endif
