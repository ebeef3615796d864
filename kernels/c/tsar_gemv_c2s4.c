/*
 * Ternary GEMV with TLUT2x4 + TGEMV8x16, written in C with tsar.h.
 *
 * out[j] = sum_i W[j, i] * act[i] for j < m (m a multiple of 16), i < k (k a multiple of 8).
 * Weights: for each strip of 16 rows, k/8 TGEMV operands of 32 bytes in K order, each packed by
 * tsar.isa.pack_tile from W[16*r : 16*r + 16, 8*t : 8*t + 8]; strips follow each other.
 * The int16 accumulator takes at most 32 TGEMVs (32 * 8 * 127 <= 32767) before it is widened
 * into two int32 accumulators.
 */
#include "tsar.h"

void tsar_gemv_c2s4(const int8_t *act, const uint8_t *weights, int32_t *out, uint64_t m, uint64_t k)
{
    register __m256i lut0 __asm__("ymm8");
    register __m256i lut1 __asm__("ymm9");
    const uint64_t tiles = k / 8;
    for (uint64_t row = 0; row < m; row += 16) {
        __m256i lo = _mm256_setzero_si256();
        __m256i hi = _mm256_setzero_si256();
        const int8_t *a = act;
        for (uint64_t t = 0; t < tiles;) {
            uint64_t chunk = tiles - t < 32 ? tiles - t : 32;
            __m256i acc = _mm256_setzero_si256();
            for (uint64_t n = 0; n < chunk; ++n) {
                TSAR_TLUT2X4(lut0, lut1, a);
                TSAR_TGEMV8X16(acc, lut0, lut1, weights);
                a += 8;
                weights += 32;
            }
            t += chunk;
            lo = _mm256_add_epi32(lo, _mm256_cvtepi16_epi32(_mm256_castsi256_si128(acc)));
            hi = _mm256_add_epi32(hi, _mm256_cvtepi16_epi32(_mm256_extracti128_si256(acc, 1)));
        }
        _mm256_storeu_si256((__m256i *)(out + row), lo);
        _mm256_storeu_si256((__m256i *)(out + row + 8), hi);
    }
}
