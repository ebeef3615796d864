/* Streaming-read bandwidth: each thread reads its contiguous slice of a buffer with AVX2 loads
 * (8 per 256 bytes, 4 independent accumulators), 'repeats' times; returns the best bytes/second over the repeats. */
#include <pthread.h>
#include <time.h>
#include "common.h"

typedef struct { const uint8_t *p; size_t n; int64_t sink; } slice;

static void *read_slice(void *arg) {
    slice *s = (slice *)arg;
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 256 <= s->n; i += 256) {
        const __m256i *p = (const __m256i *)(s->p + i);
        a0 = _mm256_add_epi64(a0, _mm256_or_si256(_mm256_load_si256(p), _mm256_load_si256(p + 4)));
        a1 = _mm256_add_epi64(a1, _mm256_or_si256(_mm256_load_si256(p + 1), _mm256_load_si256(p + 5)));
        a2 = _mm256_add_epi64(a2, _mm256_or_si256(_mm256_load_si256(p + 2), _mm256_load_si256(p + 6)));
        a3 = _mm256_add_epi64(a3, _mm256_or_si256(_mm256_load_si256(p + 3), _mm256_load_si256(p + 7)));
    }
    a0 = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
    s->sink = _mm256_extract_epi64(a0, 0) + _mm256_extract_epi64(a0, 3);
    return NULL;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

double tsar_stream_read(const void *buf, size_t bytes, int threads, int repeats) {
    if (threads < 1 || threads > 64 || ((uintptr_t)buf & 31)) return -1.0;
    slice sl[64];
    pthread_t tid[64];
    const size_t per = bytes / threads / 256 * 256;
    double best = 0.0;
    for (int r = 0; r < repeats; r++) {
        const double t0 = now();
        for (int i = 0; i < threads; i++) sl[i] = (slice){(const uint8_t *)buf + per * i, per, 0};
        for (int i = 1; i < threads; i++) pthread_create(&tid[i], NULL, read_slice, &sl[i]);
        read_slice(&sl[0]);
        for (int i = 1; i < threads; i++) pthread_join(tid[i], NULL);
        const double bw = (double)per * threads / (now() - t0);
        if (bw > best) best = bw;
    }
    return best;
}
