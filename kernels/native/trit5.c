/* 5 trits per byte (see tsar/kernels/formats/trit5.py): byte v = sum_i w_i 3^i, 32 rows per vector.
 *
 * AVX2 (decode): with u = v + 121 = sum_i t_i 3^i (t_i = w_i + 1) and q_0 = u, q_{i+1} = q_i / 3,
 * sum_i t_i a_i = u*a_0 + sum_{i>=1} q_i * (a_i - 3 a_{i-1}) (telescoping, q_5 = 0). Per token we store
 * c = [a_0, a_1 - 3a_0, ..., a_4 - 3a_3] per group as int16; the kernel needs 4 vpmulhuw (divide by 3)
 * and 5 vpmullw per 16 rows. Products wrap mod 2^16 but each group's sum is <= 2*5*127 and the int16
 * accumulator is widened every 25 groups, so the result is exact; finally subtract sum(a).
 * AVX-512 (lookup, after the lut_mm design): a 128-entry int16 table per group (entry m = value of
 * the balanced-ternary digits of m, 122..127 unused), looked up with two vpermt2w + blend by |v|,
 * negated under the sign mask; int16 sums widened every 51 groups (51 * 635 <= 32767). */
#include "common.h"

static int check(const tsar_weights *w) { return w->m % 32 != 0; }
static inline int groups(const tsar_weights *w) { return (w->k + 4) / 5; }

static int cpu_avx512(void) { return tsar_cpu_isa() >= TSAR_ISA_AVX512; }

static size_t prep_size(const tsar_weights *w) {
    /* AVX2 coefficients (10 B/group) + AVX-512 tables (256 B/group) when the CPU has AVX-512 */
    return (size_t)groups(w) * 10 + 64 + (cpu_avx512() ? (size_t)groups(w) * 256 : 0);
}

static int16_t DIGITS[5][128] __attribute__((aligned(64)));

__attribute__((constructor)) static void init_digits(void) {
    for (int m = 0; m < 128; m++) {
        int r = m;
        for (int i = 0; i < 5; i++) {
            int d = ((r % 3) + 3) % 3;
            if (d == 2) d = -1;
            DIGITS[i][m] = (int16_t)(m < 122 ? d : 0);
            r = (r - d) / 3;
        }
    }
}

AVX512_TARGET static void build_tables(const int8_t *a, int g, int16_t *tab) {
    for (int j = 0; j < g; j++) {
        for (int c = 0; c < 4; c++) {
            __m512i v = _mm512_setzero_si512();
            for (int i = 0; i < 5; i++)
                v = _mm512_add_epi16(v, _mm512_mullo_epi16(_mm512_set1_epi16(a[5 * j + i]),
                                                            _mm512_load_si512((const void *)&DIGITS[i][32 * c])));
            _mm512_store_si512((void *)(tab + 128 * j + 32 * c), v);
        }
    }
}

static void prep(const tsar_acts *s, int t) {
    const int8_t *a = s->act + s->act_stride * t;   /* zero padded past k */
    uint8_t *p = s->prep + s->prep_stride * t;
    const int g = groups(s->w);
    int16_t *c = (int16_t *)p;
    for (int j = 0; j < g; j++) {
        const int8_t *x = a + 5 * j;
        c[5 * j] = x[0];
        for (int i = 1; i < 5; i++) c[5 * j + i] = (int16_t)(x[i] - 3 * x[i - 1]);
    }
    if (cpu_avx512()) build_tables(a, g, (int16_t *)(p + tsar_round_up((size_t)g * 10, 64)));
}

static void rows_avx2(const tsar_acts *s, int32_t *out, int m0, int m1) {
    const tsar_weights *w = s->w;
    const int g = groups(w);
    const __m256i off = _mm256_set1_epi16(121), third = _mm256_set1_epi16(21846);
    for (int mb = m0 / 32; mb < m1 / 32; mb++) {
        const int8_t *wb = (const int8_t *)w->w + (size_t)mb * g * 32;
        for (int t = 0; t < s->n; t++) {
            const int16_t *c = (const int16_t *)(s->prep + s->prep_stride * t);
            __m256i lo32 = _mm256_setzero_si256(), hi32 = lo32, lo32b = lo32, hi32b = lo32;
            for (int j0 = 0; j0 < g; j0 += 25) {
                const int j1 = j0 + 25 < g ? j0 + 25 : g;
                __m256i alo = _mm256_setzero_si256(), ahi = alo;
                for (int j = j0; j < j1; j++) {
                    const __m128i *p = (const __m128i *)(wb + 32 * j);
                    __m256i ul = _mm256_add_epi16(_mm256_cvtepi8_epi16(_mm_loadu_si128(p)), off);
                    __m256i uh = _mm256_add_epi16(_mm256_cvtepi8_epi16(_mm_loadu_si128(p + 1)), off);
                    const int16_t *cj = c + 5 * j;
                    __m256i c0 = _mm256_set1_epi16(cj[0]);
                    __m256i sl = _mm256_mullo_epi16(ul, c0), sh = _mm256_mullo_epi16(uh, c0);
                    for (int i = 1; i < 5; i++) {
                        const __m256i ci = _mm256_set1_epi16(cj[i]);
                        ul = _mm256_mulhi_epu16(ul, third);
                        uh = _mm256_mulhi_epu16(uh, third);
                        sl = _mm256_add_epi16(sl, _mm256_mullo_epi16(ul, ci));
                        sh = _mm256_add_epi16(sh, _mm256_mullo_epi16(uh, ci));
                    }
                    alo = _mm256_add_epi16(alo, sl);
                    ahi = _mm256_add_epi16(ahi, sh);
                }
                lo32 = _mm256_add_epi32(lo32, _mm256_cvtepi16_epi32(_mm256_castsi256_si128(alo)));
                lo32b = _mm256_add_epi32(lo32b, _mm256_cvtepi16_epi32(_mm256_extracti128_si256(alo, 1)));
                hi32 = _mm256_add_epi32(hi32, _mm256_cvtepi16_epi32(_mm256_castsi256_si128(ahi)));
                hi32b = _mm256_add_epi32(hi32b, _mm256_cvtepi16_epi32(_mm256_extracti128_si256(ahi, 1)));
            }
            const __m256i sum = _mm256_set1_epi32(s->sums[t]);
            int32_t *o = out + (size_t)t * w->m + (size_t)mb * 32;
            _mm256_storeu_si256((__m256i *)o, _mm256_sub_epi32(lo32, sum));
            _mm256_storeu_si256((__m256i *)(o + 8), _mm256_sub_epi32(lo32b, sum));
            _mm256_storeu_si256((__m256i *)(o + 16), _mm256_sub_epi32(hi32, sum));
            _mm256_storeu_si256((__m256i *)(o + 24), _mm256_sub_epi32(hi32b, sum));
        }
    }
}

AVX512_TARGET static void rows_avx512(const tsar_acts *s, int32_t *out, int m0, int m1) {
    const tsar_weights *w = s->w;
    const int g = groups(w);
    const __m512i zero = _mm512_setzero_si512(), b64 = _mm512_set1_epi16(64);
    /* Tokens outer: one token's tables (256 B per group) stay in L1/L2 while the row blocks' weights
     * (32 B per group) stream past; weights are prefetched non-temporally so that they do not evict
     * the tables from L2 when they come from DRAM. */
    for (int t = 0; t < s->n; t++) {
        const int16_t *tab = (const int16_t *)(s->prep + s->prep_stride * t + tsar_round_up((size_t)g * 10, 64));
        for (int mb = m0 / 32; mb < m1 / 32; mb++) {
            const int8_t *wb = (const int8_t *)w->w + (size_t)mb * g * 32;
            __m512i lo = zero, hi = zero;
            for (int j0 = 0; j0 < g; j0 += 51) {
                const int j1 = j0 + 51 < g ? j0 + 51 : g;
                __m512i acc = zero;
                for (int j = j0; j < j1; j++) {
                    const int16_t *tj = tab + 128 * j;
                    if (!(j & 1)) _mm_prefetch((const char *)(wb + 32 * j + 2048), _MM_HINT_NTA);
                    const __m512i v = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(wb + 32 * j)));
                    const __mmask32 neg = _mm512_movepi16_mask(v);
                    const __m512i mag = _mm512_abs_epi16(v);
                    const __mmask32 upper = _mm512_test_epi16_mask(mag, b64);
                    const __m512i r0 = _mm512_permutex2var_epi16(_mm512_load_si512((const void *)tj), mag,
                                                                 _mm512_load_si512((const void *)(tj + 32)));
                    const __m512i r1 = _mm512_permutex2var_epi16(_mm512_load_si512((const void *)(tj + 64)), mag,
                                                                 _mm512_load_si512((const void *)(tj + 96)));
                    __m512i r = _mm512_mask_blend_epi16(upper, r0, r1);
                    r = _mm512_mask_sub_epi16(r, neg, zero, r);
                    acc = _mm512_add_epi16(acc, r);
                }
                lo = _mm512_add_epi32(lo, _mm512_cvtepi16_epi32(_mm512_castsi512_si256(acc)));
                hi = _mm512_add_epi32(hi, _mm512_cvtepi16_epi32(_mm512_extracti64x4_epi64(acc, 1)));
            }
            int32_t *o = out + (size_t)t * w->m + (size_t)mb * 32;
            _mm512_storeu_si512((void *)o, lo);
            _mm512_storeu_si512((void *)(o + 16), hi);
        }
    }
}

const tsar_kernel tsar_kernel_trit5 = {
    .row_unit = 32, .prep_size = prep_size, .prep = prep, .rows = {NULL, rows_avx2, rows_avx512},
    .check = check};
