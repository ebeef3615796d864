/*
 * int8 dot product in plain C; gcc -O3 -mavx2 vectorizes it (vpmovsxbw + vpmaddwd + vpaddd).
 * Used as the AVX2 simulator benchmark. n is any length.
 */
#include <stdint.h>

int32_t dot_i8(const int8_t *a, const int8_t *b, uint64_t n)
{
    int32_t sum = 0;
    for (uint64_t i = 0; i < n; ++i)
        sum += (int32_t)a[i] * (int32_t)b[i];
    return sum;
}
