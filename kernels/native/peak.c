/* The host's int8 multiply-add peak, one thread: a loop of independent multiply-adds with no loads.
 *   AVX2: vpmaddubsw (32 byte pairs -> 16 int16) + vpaddw per accumulator, 6 accumulators;
 *   AVX-512 VNNI: vpdpbusd (64 byte pairs, accumulated into int32), 8 accumulators;
 *   AVX-VNNI: the VEX vpdpbusd ymm (32 byte pairs into int32), 10 accumulators.
 * Returns the best ops/second over the repeats (2 ops per int8 multiply-add), or -1 when the
 * requested ISA is not available. */
#include <time.h>
#include "common.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static volatile int32_t sink;

static double avx2_loop(long iterations) {
    __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(5), c = _mm256_set1_epi8(7);
    __m256i c0 = _mm256_setzero_si256(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0;
    const double t0 = now();
    for (long i = 0; i < iterations; i++) {
        /* six distinct operand pairs, kept live and opaque: no multiply can be shared or hoisted;
         * six accumulators and three operands fit the 16 registers with room for temporaries */
        __asm__ volatile("" : "+x"(a), "+x"(b), "+x"(c));
        c0 = _mm256_add_epi16(c0, _mm256_maddubs_epi16(a, b));
        c1 = _mm256_add_epi16(c1, _mm256_maddubs_epi16(b, c));
        c2 = _mm256_add_epi16(c2, _mm256_maddubs_epi16(c, a));
        c3 = _mm256_add_epi16(c3, _mm256_maddubs_epi16(b, a));
        c4 = _mm256_add_epi16(c4, _mm256_maddubs_epi16(c, b));
        c5 = _mm256_add_epi16(c5, _mm256_maddubs_epi16(a, c));
    }
    const double seconds = now() - t0;
    __m256i s = _mm256_add_epi16(_mm256_add_epi16(_mm256_add_epi16(c0, c1), _mm256_add_epi16(c2, c3)),
                                 _mm256_add_epi16(c4, c5));
    sink = _mm256_extract_epi32(s, 0);
    return (double)iterations * 6 * 32 * 2 / seconds;
}

#ifndef TSAR_SIM
AVX512_TARGET static double avx512_loop(long iterations) {
    __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(5), c = _mm512_set1_epi8(7), d = _mm512_set1_epi8(9);
    __m512i c0 = _mm512_setzero_si512(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0;
    const double t0 = now();
    for (long i = 0; i < iterations; i++) {
        __asm__ volatile("" : "+v"(a), "+v"(b), "+v"(c), "+v"(d));
        c0 = _mm512_dpbusd_epi32(c0, a, b);
        c1 = _mm512_dpbusd_epi32(c1, b, c);
        c2 = _mm512_dpbusd_epi32(c2, c, d);
        c3 = _mm512_dpbusd_epi32(c3, d, a);
        c4 = _mm512_dpbusd_epi32(c4, a, c);
        c5 = _mm512_dpbusd_epi32(c5, b, d);
        c6 = _mm512_dpbusd_epi32(c6, c, a);
        c7 = _mm512_dpbusd_epi32(c7, d, b);
    }
    const double seconds = now() - t0;
    __m512i s = _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(c0, c1), _mm512_add_epi32(c2, c3)),
                                 _mm512_add_epi32(_mm512_add_epi32(c4, c5), _mm512_add_epi32(c6, c7)));
    sink = _mm512_reduce_add_epi32(s);
    return (double)iterations * 8 * 64 * 2 / seconds;
}

AVXVNNI_TARGET static double avxvnni_loop(long iterations) {
    /* ten accumulators: a 5-cycle latency at two per cycle needs ten in flight; tsar_dpbusd_avx
     * keeps each in place (the builtin's copies and spills made the loop measure the front end) */
    __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(5), c = _mm256_set1_epi8(7);
    __m256i c0 = _mm256_setzero_si256(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0,
            c8 = c0, c9 = c0;
    const double t0 = now();
    for (long i = 0; i < iterations; i++) {
        __asm__ volatile("" : "+x"(a), "+x"(b), "+x"(c));
        c0 = tsar_dpbusd_avx(c0, a, b);
        c1 = tsar_dpbusd_avx(c1, b, c);
        c2 = tsar_dpbusd_avx(c2, c, a);
        c3 = tsar_dpbusd_avx(c3, b, a);
        c4 = tsar_dpbusd_avx(c4, c, b);
        c5 = tsar_dpbusd_avx(c5, a, c);
        c6 = tsar_dpbusd_avx(c6, a, a);
        c7 = tsar_dpbusd_avx(c7, b, b);
        c8 = tsar_dpbusd_avx(c8, c, c);
        c9 = tsar_dpbusd_avx(c9, a, b);
    }
    const double seconds = now() - t0;
    __m256i s = _mm256_add_epi32(_mm256_add_epi32(_mm256_add_epi32(c0, c1), _mm256_add_epi32(c2, c3)),
                                 _mm256_add_epi32(_mm256_add_epi32(c4, c5), _mm256_add_epi32(c6, c7)));
    s = _mm256_add_epi32(s, _mm256_add_epi32(c8, c9));
    sink = _mm256_extract_epi32(s, 0);
    return (double)iterations * 10 * 32 * 2 / seconds;
}
#endif

double tsar_int8_peak(int isa, long iterations, int repeats) {
    double best = 0.0;
    for (int r = 0; r < repeats; r++) {
        double ops = -1.0;
        if (isa == TSAR_ISA_AVX2 && tsar_cpu_isa() != 0) ops = avx2_loop(iterations);
#ifndef TSAR_SIM
        else if (isa == TSAR_ISA_AVX512 && tsar_cpu_isa() == TSAR_ISA_AVX512) ops = avx512_loop(iterations);
        else if (isa == TSAR_ISA_AVXVNNI && tsar_kernel_isa(TSAR_INT2, TSAR_ISA_AVXVNNI) == TSAR_ISA_AVXVNNI)
            ops = avxvnni_loop(iterations);
#endif
        if (ops < 0) return -1.0;
        if (ops > best) best = ops;
    }
    return best;
}
