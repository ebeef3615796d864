/*
 * Plain-C kernels for the gcc differential test (tests/sim/test_gcc_differential.py): each is
 * built with several gcc flag sets, run natively from the .so and in the simulator, and the
 * results compared bit for bit. Freestanding (no libc); ordinary C that gcc auto-vectorizes.
 * Buffers are caller-owned and never cleared here (a clearing loop would become a memset call).
 */
#include <stddef.h>
#include <stdint.h>

/* int8 x int8 dot product, int32 accumulation. */
int32_t dot_i8(const int8_t *a, const int8_t *b, size_t n)
{
    int32_t sum = 0;
    for (size_t i = 0; i < n; ++i)
        sum += (int32_t)a[i] * (int32_t)b[i];
    return sum;
}

/* y = W x for a row-major int8 W of m rows and k columns; int32 results. */
void gemv_i8(const int8_t *w, const int8_t *x, int32_t *y, size_t m, size_t k)
{
    for (size_t r = 0; r < m; ++r) {
        const int8_t *row = w + r * k;
        int32_t sum = 0;
        for (size_t c = 0; c < k; ++c)
            sum += (int32_t)row[c] * (int32_t)x[c];
        y[r] = sum;
    }
}

/* Absmax int8 quantization: q[i] = clamp(round(x[i] * 127 / max|x|), -127, 127), rounding half
 * away from zero through a truncating cast. Returns the dequantization scale max|x| / 127. */
float quant_absmax_i8(const float *x, int8_t *q, size_t n)
{
    float amax = 0.0f;
    for (size_t i = 0; i < n; ++i) {
        float a = x[i] < 0.0f ? -x[i] : x[i];
        amax = a > amax ? a : amax;
    }
    float scale = amax > 0.0f ? 127.0f / amax : 0.0f;
    for (size_t i = 0; i < n; ++i) {
        float v = x[i] * scale;
        int32_t r = (int32_t)(v + (v >= 0.0f ? 0.5f : -0.5f));
        r = r > 127 ? 127 : r;
        r = r < -127 ? -127 : r;
        q[i] = (int8_t)r;
    }
    return amax / 127.0f;
}

/* out[i] = (float)acc[i] * scale. */
void dequant_i32(const int32_t *acc, float *out, size_t n, float scale)
{
    for (size_t i = 0; i < n; ++i)
        out[i] = (float)acc[i] * scale;
}

/* Byte histogram into caller-initialised 16-bit bins (they wrap). */
void hist_u8(const uint8_t *x, size_t n, uint16_t *hist)
{
    for (size_t i = 0; i < n; ++i)
        hist[x[i]]++;
}

/* y[i] = clamp(x[i] >> 1, lo, hi) as a byte; returns how many values were clamped. */
uint32_t clamp_i16_u8(const int16_t *x, uint8_t *y, size_t n, int16_t lo, int16_t hi)
{
    uint32_t clipped = 0;
    for (size_t i = 0; i < n; ++i) {
        int16_t v = (int16_t)(x[i] >> 1);
        if (v < lo) {
            v = lo;
            ++clipped;
        } else if (v > hi) {
            v = hi;
            ++clipped;
        }
        y[i] = (uint8_t)v;
    }
    return clipped;
}

/* Weighted mean in double: sum((double)x[i] * w[i]) / n (0 for n == 0). */
double wmean_f64(const float *x, const int32_t *w, size_t n)
{
    double sum = 0.0;
    for (size_t i = 0; i < n; ++i)
        sum += (double)x[i] * (double)w[i];
    return n ? sum / (double)n : 0.0;
}

/* Ternary unpack: four 2-bit codes per byte, lowest bits first; code c gives (c & 1) - (c >> 1),
 * i.e. 00 -> 0, 01 -> +1, 10 -> -1, 11 -> 0. n is the number of weights. */
void unpack_ternary(const uint8_t *packed, int8_t *out, size_t n)
{
    size_t full = n / 4;
    for (size_t j = 0; j < full; ++j) {
        uint8_t b = packed[j];
        for (int s = 0; s < 4; ++s) {
            uint8_t c = (uint8_t)((b >> (2 * s)) & 3u);
            out[4 * j + s] = (int8_t)((c & 1u) - (c >> 1));
        }
    }
    for (size_t i = 4 * full; i < n; ++i) {
        uint8_t c = (uint8_t)((packed[i >> 2] >> (2 * (i & 3))) & 3u);
        out[i] = (int8_t)((c & 1u) - (c >> 1));
    }
}

/* Data-dependent control flow: a switch on the low bits (a jump table), variable shifts,
 * division by constants and by data, and a branch on the sign. Returns a checksum. */
int64_t branchy_i32(const int32_t *x, int32_t *out, size_t n)
{
    int64_t acc = 0;
    for (size_t i = 0; i < n; ++i) {
        int32_t v = x[i];
        int32_t r;
        switch ((uint32_t)v & 7u) {
        case 0:
            r = v / 7;
            break;
        case 1:
            r = v % 13;
            break;
        case 2:
            r = (int32_t)((uint32_t)v << ((v >> 3) & 31));
            break;
        case 3:
            r = v >> ((v >> 5) & 31);
            break;
        case 4:
            r = (int32_t)((uint32_t)v >> ((v >> 8) & 31));
            break;
        case 5:
            r = 1000003 / ((v >> 16) | 1);
            break;
        case 6:
            r = v < -1000 ? -1000 : v > 1000 ? 1000 : v;
            break;
        default:
            r = ~v ^ (int32_t)i;
            break;
        }
        if (r < 0)
            acc -= r;
        else
            acc += (int64_t)r * 3;
        out[i] = r;
    }
    return acc;
}
