/* Per-token absmax int8 quantization and int32 -> float dequantization (AVX2).
 * Same float32 operations as tsar.kernels.quant: amax = max(max|x|, 1e-5), q = rint(x * (127/amax))
 * clipped to [-127, 127], scale = amax / 127; rounding is round-half-even (MXCSR default). */
#include "common.h"

static float quantize_row(const float *x, int8_t *q, int k) {
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 mx = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= k; i += 8) mx = _mm256_max_ps(mx, _mm256_and_ps(absmask, _mm256_loadu_ps(x + i)));
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    float amax = _mm_cvtss_f32(m4);
    for (; i < k; i++) { float v = x[i] < 0 ? -x[i] : x[i]; amax = v > amax ? v : amax; }
    if (!(amax > 1e-5f)) amax = 1e-5f;
    const float inv = 127.0f / amax;
    const __m256 vinv = _mm256_set1_ps(inv);
    const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    const __m256i lo = _mm256_set1_epi8(-127);
    for (i = 0; i + 32 <= k; i += 32) {
        __m256i v0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i), vinv));
        __m256i v1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i + 8), vinv));
        __m256i v2 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i + 16), vinv));
        __m256i v3 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i + 24), vinv));
        __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(v0, v1), _mm256_packs_epi32(v2, v3));
        p = _mm256_max_epi8(_mm256_permutevar8x32_epi32(p, perm), lo);
        _mm256_storeu_si256((__m256i *)(q + i), p);
    }
    for (; i < k; i++) {
        int v = _mm_cvtss_si32(_mm_set_ss(x[i] * inv));
        q[i] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
    }
    return amax / 127.0f;
}

void tsar_quantize_rows(const float *x, int8_t *q, float *scales, int n, int k) {
    for (int t = 0; t < n; t++) scales[t] = quantize_row(x + (size_t)t * k, q + (size_t)t * k, k);
}

/* Quantize token t of x into row t of act (stride act_stride, zero padded to the stride). */
float tsar_quantize_token(const float *x, int8_t *act, int k, size_t act_stride) {
    for (size_t i = (size_t)k; i < act_stride; i++) act[i] = 0;
    return quantize_row(x, act, k);
}

void tsar_dequantize(const int32_t *acc, float *y, const float *scales, float w_scale,
                     int n, int m, int m0, int m1) {
    for (int t = 0; t < n; t++) {
        const float d = scales[t] * w_scale;
        const __m256 vd = _mm256_set1_ps(d);
        const int32_t *a = acc + (size_t)t * m;
        float *o = y + (size_t)t * m;
        int i = m0;
        for (; i + 8 <= m1; i += 8)
            _mm256_storeu_ps(o + i, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)(a + i))), vd));
        for (; i < m1; i++) o[i] = (float)a[i] * d;
    }
}
