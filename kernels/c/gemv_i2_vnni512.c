/* int2 GEMV with AVX-512 VNNI: out[r] = sum_k (code(r, k) - 1) * act[k].
 *
 * Weights: rows of k / 4 bytes; each 256-wide block of k is 64 bytes, byte j holding the 2-bit
 * codes (0, 1, 2 = -1, 0, +1) of k = 256 b + j (bits 1:0), + 64 (bits 3:2), + 128 (bits 5:4),
 * + 192 (bits 7:6). Activations int8, k a multiple of 256. vpdpbusd multiplies the unsigned codes
 * by the signed activations; the sum of the activations removes the +1 bias of the codes.
 * Used by `tsar bench-sim` (the simulator's speed on AVX-512 int8 code). */
#include <immintrin.h>
#include <stdint.h>

void gemv_i2_vnni512(const uint8_t *w, const int8_t *act, int32_t *out, int rows, int k)
{
    __m512i sums = _mm512_setzero_si512();
    for (int i = 0; i < k; i += 64)
        sums = _mm512_dpbusd_epi32(sums, _mm512_set1_epi8(1), _mm512_loadu_si512(act + i));
    const int32_t bias = _mm512_reduce_add_epi32(sums);
    const __m512i three = _mm512_set1_epi8(3);
    for (int r = 0; r < rows; r++) {
        const uint8_t *wr = w + (long)r * (k / 4);
        __m512i acc = _mm512_setzero_si512();
        for (int b = 0; b < k / 256; b++) {
            const __m512i codes = _mm512_loadu_si512(wr + 64 * b);
            const int8_t *a = act + 256 * b;
            acc = _mm512_dpbusd_epi32(acc, _mm512_and_si512(codes, three), _mm512_loadu_si512(a));
            acc = _mm512_dpbusd_epi32(acc, _mm512_and_si512(_mm512_srli_epi16(codes, 2), three),
                                      _mm512_loadu_si512(a + 64));
            acc = _mm512_dpbusd_epi32(acc, _mm512_and_si512(_mm512_srli_epi16(codes, 4), three),
                                      _mm512_loadu_si512(a + 128));
            acc = _mm512_dpbusd_epi32(acc, _mm512_and_si512(_mm512_srli_epi16(codes, 6), three),
                                      _mm512_loadu_si512(a + 192));
        }
        out[r] = _mm512_reduce_add_epi32(acc) - bias;
    }
}
