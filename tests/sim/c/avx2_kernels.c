/*
 * AVX2-intrinsics kernels for the gcc differential test (tests/sim/test_gcc_differential.py).
 * Freestanding: nothing outside this file is called.
 */
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

static inline int32_t hsum_epi32(__m256i v)
{
    v = _mm256_add_epi32(v, _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(4, 5, 6, 7, 0, 1, 2, 3)));
    v = _mm256_add_epi32(v, _mm256_shuffle_epi32(v, _MM_SHUFFLE(1, 0, 3, 2)));
    v = _mm256_add_epi32(v, _mm256_shuffle_epi32(v, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm256_cvtsi256_si32(v);
}

/* sum(x[i] * lut[idx[i] & 15]) for uint8 activations and int8 weights looked up in a 16-entry
 * table: vpshufb lookup, vpmaddubsw (pairs saturate to int16), vpmaddwd with ones, then a
 * horizontal sum; the tail is scalar (and does not saturate). */
int32_t lut_dot_avx2(const uint8_t *x, const uint8_t *idx, const int8_t *lut, size_t n)
{
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)lut));
    const __m256i nibble = _mm256_set1_epi8(0x0f);
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i acc = _mm256_setzero_si256();
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256i xv = _mm256_loadu_si256((const __m256i *)(x + i));
        __m256i iv = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(idx + i)), nibble);
        __m256i w = _mm256_shuffle_epi8(table, iv);
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(xv, w), ones));
    }
    int32_t sum = hsum_epi32(acc);
    for (; i < n; ++i)
        sum += (int32_t)x[i] * (int32_t)lut[idx[i] & 15];
    return sum;
}

/* out[i] = saturate_int8(round((float)acc[i] * scale)) with the current rounding mode: vcvtdq2ps,
 * vmulps, vcvtps2dq, two saturating packs and a vpermd to restore the order; scalar tail through
 * vcvtsi2ss / vcvtss2si. */
void requant_avx2(const int32_t *acc, int8_t *out, size_t n, float scale)
{
    const __m256 s = _mm256_set1_ps(scale);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256i q[4];
        for (int j = 0; j < 4; ++j) {
            __m256 f = _mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)(acc + i + 8 * j)));
            q[j] = _mm256_cvtps_epi32(_mm256_mul_ps(f, s));
        }
        __m256i b = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
        _mm256_storeu_si256((__m256i *)(out + i), _mm256_permutevar8x32_epi32(b, order));
    }
    for (; i < n; ++i) {
        int32_t r = _mm_cvtss_si32(_mm_set_ss((float)acc[i] * scale));
        r = r > 127 ? 127 : r;
        r = r < -128 ? -128 : r;
        out[i] = (int8_t)r;
    }
}
