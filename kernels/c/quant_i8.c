/* Absmax int8 quantization of float activations (the BitNet b1.58 activation step): a float
 * reduction, then per element a multiply, round-half-away-from-zero, clamp to [-127, 127] and a byte
 * store. gcc -O3 vectorizes both loops and leaves scalar tails: a kernel that mixes vector and
 * scalar code, used by `tsar bench-sim`. */
#include <stddef.h>
#include <stdint.h>

/* q[i] = clamp(round(x[i] * 127 / max|x|)); returns the dequantization scale max|x| / 127. */
float quant_absmax_i8(const float *x, int8_t *q, size_t n)
{
    float amax = 0.0f;
    for (size_t i = 0; i < n; i++) {
        float a = x[i] < 0.0f ? -x[i] : x[i];
        amax = a > amax ? a : amax;
    }
    float s = amax > 0.0f ? 127.0f / amax : 0.0f;
    for (size_t i = 0; i < n; i++) {
        float v = x[i] * s;
        int r = (int)(v + (v >= 0.0f ? 0.5f : -0.5f));
        q[i] = (int8_t)(r > 127 ? 127 : r < -127 ? -127 : r);
    }
    return amax / 127.0f;
}
