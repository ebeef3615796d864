/* 2-bit up-convert + dot-product kernels on Intel's VNNI4-interleaved int2 layout
 * (intel-aipc-lowbit-paper.md Fig. 1/2; see tsar/kernels/formats/int2_vnni.py). Codes c = w + 1, so
 * the result is sum(c * a) - sum(a) and the up-convert is shift + and (no table): for a 32-byte
 * vector v, field f (rows 8f..8f+7) is (v >> 2f) & 3; we use v & 3, v & 0xC (x4), (v >> 4) & 3 and
 * (v >> 4) & 0xC (x4) so that one shift serves all four fields. Dword d of field f pairs with the 4
 * broadcast activations of the same 4 columns.
 *   AVX2: pmaddubsw into int16 (<= 2032 per step for scaled fields), widened every 16 steps;
 *   tokens in pairs share each loaded and decoded weight vector.
 *   AVX-VNNI: the AVX2 loop with one VEX vpdpbusd per field and token, int32 all the way.
 *   AVX-512 VNNI: vpdpbusd on two column-quads per zmm, int32 all the way. */
#include "common.h"
#ifndef TSAR_SIM
#include <stdlib.h>
#endif

#define FLUSH 16

static int check(const tsar_weights *w) { return w->m % 32 || w->k % 4; }
static size_t prep_size(const tsar_weights *w) { (void)w; return 0; }
static void prep(const tsar_acts *s, int t) { (void)s; (void)t; }

/* The 32 outputs of row block mb for token t from its four field sums (fields 1 and 3 hold
 * codes x4: shifted back), less the token's activation sum (the codes' +1 bias). */
static inline __attribute__((always_inline)) void store_block(const tsar_acts *s, int32_t *out,
                                                              const __m256i r[4], int mb, int t) {
    const __m256i sum = _mm256_set1_epi32(s->sums[t]);
    int32_t *o = out + (size_t)t * s->w->m + (size_t)mb * 32;
    _mm256_storeu_si256((__m256i *)o, _mm256_sub_epi32(r[0], sum));
    _mm256_storeu_si256((__m256i *)(o + 8), _mm256_sub_epi32(_mm256_srai_epi32(r[1], 2), sum));
    _mm256_storeu_si256((__m256i *)(o + 16), _mm256_sub_epi32(r[2], sum));
    _mm256_storeu_si256((__m256i *)(o + 24), _mm256_sub_epi32(_mm256_srai_epi32(r[3], 2), sum));
}

/* One 32-row block for tokens t and, when pair is set, t + 1: each loaded and decoded weight
 * vector feeds both tokens' multiply-adds (int16 partial sums, widened into int32 every FLUSH steps). */
static inline __attribute__((always_inline)) void block_avx2(const tsar_acts *s, int32_t *out,
                                                            const uint8_t *wb, int kq, int mb, int t,
                                                            int pair) {
    const __m256i m3 = _mm256_set1_epi8(0x03), mc = _mm256_set1_epi8(0x0c);
    const __m256i one = _mm256_set1_epi16(1);
    const int8_t *a0 = s->act + s->act_stride * t;
    const int8_t *a1 = pair ? a0 + s->act_stride : a0;
    __m256i acc[8];
    for (int i = 0; i < 8; i++) acc[i] = _mm256_setzero_si256();
    for (int j0 = 0; j0 < kq; j0 += FLUSH) {
        const int j1 = j0 + FLUSH < kq ? j0 + FLUSH : kq;
        __m256i p0 = _mm256_setzero_si256(), p1 = p0, p2 = p0, p3 = p0;   /* token t */
        __m256i q0 = p0, q1 = p0, q2 = p0, q3 = p0;                       /* token t + 1 */
        for (int j = j0; j < j1; j++) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)(wb + 32 * j));
            const __m256i h = _mm256_srli_epi16(v, 4);
            int32_t x0q, x1q;
            __builtin_memcpy(&x0q, a0 + 4 * j, 4);
            __builtin_memcpy(&x1q, a1 + 4 * j, 4);
            const __m256i x0 = _mm256_set1_epi32(x0q), x1 = _mm256_set1_epi32(x1q);
            __m256i f = _mm256_and_si256(v, m3);
            p0 = _mm256_add_epi16(p0, _mm256_maddubs_epi16(f, x0));
            if (pair) q0 = _mm256_add_epi16(q0, _mm256_maddubs_epi16(f, x1));
            f = _mm256_and_si256(v, mc);
            p1 = _mm256_add_epi16(p1, _mm256_maddubs_epi16(f, x0));
            if (pair) q1 = _mm256_add_epi16(q1, _mm256_maddubs_epi16(f, x1));
            f = _mm256_and_si256(h, m3);
            p2 = _mm256_add_epi16(p2, _mm256_maddubs_epi16(f, x0));
            if (pair) q2 = _mm256_add_epi16(q2, _mm256_maddubs_epi16(f, x1));
            f = _mm256_and_si256(h, mc);
            p3 = _mm256_add_epi16(p3, _mm256_maddubs_epi16(f, x0));
            if (pair) q3 = _mm256_add_epi16(q3, _mm256_maddubs_epi16(f, x1));
        }
        acc[0] = _mm256_add_epi32(acc[0], _mm256_madd_epi16(p0, one));
        acc[1] = _mm256_add_epi32(acc[1], _mm256_madd_epi16(p1, one));
        acc[2] = _mm256_add_epi32(acc[2], _mm256_madd_epi16(p2, one));
        acc[3] = _mm256_add_epi32(acc[3], _mm256_madd_epi16(p3, one));
        acc[4] = _mm256_add_epi32(acc[4], _mm256_madd_epi16(q0, one));
        acc[5] = _mm256_add_epi32(acc[5], _mm256_madd_epi16(q1, one));
        acc[6] = _mm256_add_epi32(acc[6], _mm256_madd_epi16(q2, one));
        acc[7] = _mm256_add_epi32(acc[7], _mm256_madd_epi16(q3, one));
    }
    for (int u = 0; u < 1 + pair; u++) store_block(s, out, acc + 4 * u, mb, t + u);
}

/* AVX-VNNI (the VEX vpdpbusd of Intel's AI-PC cores, Gracemont and Zen 5): the AVX2 block with
 * each pmaddubsw + add pair replaced by one vpdpbusd into int32 (no int16 partials, no flush). */
AVXVNNI_TARGET static inline __attribute__((always_inline)) void block_avxvnni(
        const tsar_acts *s, int32_t *out, const uint8_t *wb, int kq, int mb, int t, int pair) {
    const __m256i m3 = _mm256_set1_epi8(0x03), mc = _mm256_set1_epi8(0x0c);
    const int8_t *a0 = s->act + s->act_stride * t;
    const int8_t *a1 = pair ? a0 + s->act_stride : a0;
    __m256i acc[8];
    for (int i = 0; i < 8; i++) acc[i] = _mm256_setzero_si256();
    /* One token: column steps in pairs, the odd step into acc[4..7], so that eight dot-product
     * chains are in flight (four would leave the 5-cycle latency exposed); folded at the end. */
    const int step = pair ? 1 : 2;
    int j = 0;
    for (; j + step <= kq; j += step) {
        for (int e = 0; e < step; e++) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)(wb + 32 * (j + e)));
            const __m256i h = _mm256_srli_epi16(v, 4);
            int32_t x0q, x1q;
            __builtin_memcpy(&x0q, a0 + 4 * (j + e), 4);
            __builtin_memcpy(&x1q, a1 + 4 * (j + e), 4);
            const __m256i x0 = _mm256_set1_epi32(x0q), x1 = _mm256_set1_epi32(x1q);
            const __m256i f0 = _mm256_and_si256(v, m3), f1 = _mm256_and_si256(v, mc);
            const __m256i f2 = _mm256_and_si256(h, m3), f3 = _mm256_and_si256(h, mc);
            __m256i *r = acc + 4 * e;      /* e = 1 only for one token */
            r[0] = tsar_dpbusd_avx(r[0], f0, x0);
            r[1] = tsar_dpbusd_avx(r[1], f1, x0);
            r[2] = tsar_dpbusd_avx(r[2], f2, x0);
            r[3] = tsar_dpbusd_avx(r[3], f3, x0);
            if (pair) {
                acc[4] = tsar_dpbusd_avx(acc[4], f0, x1);
                acc[5] = tsar_dpbusd_avx(acc[5], f1, x1);
                acc[6] = tsar_dpbusd_avx(acc[6], f2, x1);
                acc[7] = tsar_dpbusd_avx(acc[7], f3, x1);
            }
        }
    }
    if (j < kq) {  /* one token, an odd number of column steps: the last one */
        const __m256i v = _mm256_loadu_si256((const __m256i *)(wb + 32 * j));
        const __m256i h = _mm256_srli_epi16(v, 4);
        int32_t x0q;
        __builtin_memcpy(&x0q, a0 + 4 * j, 4);
        const __m256i x0 = _mm256_set1_epi32(x0q);
        acc[0] = tsar_dpbusd_avx(acc[0], _mm256_and_si256(v, m3), x0);
        acc[1] = tsar_dpbusd_avx(acc[1], _mm256_and_si256(v, mc), x0);
        acc[2] = tsar_dpbusd_avx(acc[2], _mm256_and_si256(h, m3), x0);
        acc[3] = tsar_dpbusd_avx(acc[3], _mm256_and_si256(h, mc), x0);
    }
    if (!pair)
        for (int f = 0; f < 4; f++) acc[f] = _mm256_add_epi32(acc[f], acc[4 + f]);
    for (int u = 0; u < 1 + pair; u++) store_block(s, out, acc + 4 * u, mb, t + u);
}

/* Weight-block-outer, tokens inner, in pairs (as the AVX2 GEMV path), for every N. */
AVXVNNI_TARGET static void rows_avxvnni(const tsar_acts *s, int32_t *out, int m0, int m1) {
    const int kq = s->w->k / 4;
    for (int mb = m0 / 32; mb < m1 / 32; mb++) {
        const uint8_t *wb = s->w->w + (size_t)mb * kq * 32;
        int t = 0;
        for (; t + 1 < s->n; t += 2) block_avxvnni(s, out, wb, kq, mb, t, 1);
        if (t < s->n) block_avxvnni(s, out, wb, kq, mb, t, 0);
    }
}

/* GEMM (N >= GEMM_MIN_N): each 32-row block is first decoded once into plain codes 0..3, one
 * 32-byte vector per field and step (dec[j][f], 128 bytes per 4 columns: 80 KiB at K = 2560, held
 * in L2), which then serves every token. The micro-kernel holds two fields x four tokens of int16
 * partial sums (8 registers), two weight vectors and four broadcast activation quads: per step 6
 * loads, 8 vpmaddubsw and 8 vpaddw, so the multiply ports (2 per cycle) and the 4 vector ALUs are
 * equally loaded and no decode is left in the loop. int16 sums are exact for GEMM_FLUSH = 32 steps
 * (|pair sum| <= 2 * 3 * 128), then widened into int32 partials kept in memory. */
#define GEMM_MIN_N 4
#define GEMM_FLUSH 32

static void decode_block_avx2(const uint8_t *wb, int kq, uint8_t *dec) {
    const __m256i m3 = _mm256_set1_epi8(0x03);
    for (int j = 0; j < kq; j++) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)(wb + 32 * j));
        __m256i *d = (__m256i *)(dec + 128 * (size_t)j);
        _mm256_store_si256(d, _mm256_and_si256(v, m3));
        _mm256_store_si256(d + 1, _mm256_and_si256(_mm256_srli_epi16(v, 2), m3));
        _mm256_store_si256(d + 2, _mm256_and_si256(_mm256_srli_epi16(v, 4), m3));
        _mm256_store_si256(d + 3, _mm256_and_si256(_mm256_srli_epi16(v, 6), m3));
    }
}

/* Fields fp, fp + 1 of one decoded block for T (1..4) tokens from t; adds sum(c * a) into
 * acc[f][u] (8 int32 lanes = rows 8 (fp + f) .. + 7 of the block). */
static inline __attribute__((always_inline)) void gemm_fields_avx2(
        const tsar_acts *s, const uint8_t *dec, int kq, int t, int T, int fp, __m256i acc[2][4]) {
    const __m256i one = _mm256_set1_epi16(1);
    const int8_t *a[4];
    for (int u = 0; u < 4; u++) a[u] = s->act + s->act_stride * (t + (u < T ? u : 0));
    for (int j0 = 0; j0 < kq; j0 += GEMM_FLUSH) {
        const int j1 = j0 + GEMM_FLUSH < kq ? j0 + GEMM_FLUSH : kq;
        if (T == 4) {
            /* The 4 x 2 micro-kernel in assembly: compilers keep the int16 sums in place only
             * sometimes (gcc 12 copies every sum once per step and spills one, which makes the
             * loop dispatch-bound at ~45 % of the peak). ymm0-7 = sums, ymm8-9 = weights,
             * ymm10-13 = activation quads, ymm14-15 = products. */
            const uint8_t *d = dec + 128 * (size_t)j0 + 32 * fp;
            long j = 4L * (j0 - j1);   /* to 0 over pointers advanced by 4 j1: add + jnz end the loop */
            const long jend = 4L * j1;
            __asm__ volatile(
                TSAR_ASM_ZERO_YMM0_7
                ".p2align 4\n"
                "1:\n\t"
                "vmovdqa (%[d]), %%ymm8\n\t"
                "vmovdqa 32(%[d]), %%ymm9\n\t"
                "vpbroadcastd (%[a0],%[j]), %%ymm10\n\t"
                "vpbroadcastd (%[a1],%[j]), %%ymm11\n\t"
                "vpbroadcastd (%[a2],%[j]), %%ymm12\n\t"
                "vpbroadcastd (%[a3],%[j]), %%ymm13\n\t"
                "vpmaddubsw %%ymm10, %%ymm8, %%ymm14\n\t" "vpaddw %%ymm14, %%ymm0, %%ymm0\n\t"
                "vpmaddubsw %%ymm10, %%ymm9, %%ymm15\n\t" "vpaddw %%ymm15, %%ymm4, %%ymm4\n\t"
                "vpmaddubsw %%ymm11, %%ymm8, %%ymm14\n\t" "vpaddw %%ymm14, %%ymm1, %%ymm1\n\t"
                "vpmaddubsw %%ymm11, %%ymm9, %%ymm15\n\t" "vpaddw %%ymm15, %%ymm5, %%ymm5\n\t"
                "vpmaddubsw %%ymm12, %%ymm8, %%ymm14\n\t" "vpaddw %%ymm14, %%ymm2, %%ymm2\n\t"
                "vpmaddubsw %%ymm12, %%ymm9, %%ymm15\n\t" "vpaddw %%ymm15, %%ymm6, %%ymm6\n\t"
                "vpmaddubsw %%ymm13, %%ymm8, %%ymm14\n\t" "vpaddw %%ymm14, %%ymm3, %%ymm3\n\t"
                "vpmaddubsw %%ymm13, %%ymm9, %%ymm15\n\t" "vpaddw %%ymm15, %%ymm7, %%ymm7\n\t"
                "addq $128, %[d]\n\t"
                "addq $4, %[j]\n\t"
                "jnz 1b\n\t"
                /* widen: int32 += madd(int16 sums, 1) */
                TSAR_ASM_WIDEN_YMM0_7
                : [d] "+r"(d), [j] "+r"(j)
                : [a0] "r"(a[0] + jend), [a1] "r"(a[1] + jend), [a2] "r"(a[2] + jend),
                  [a3] "r"(a[3] + jend), [acc] "r"(acc)
                : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",
                  "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "cc", "memory");
            continue;
        }
        __m256i p[2][4];
        for (int f = 0; f < 2; f++)
            for (int u = 0; u < 4; u++) p[f][u] = _mm256_setzero_si256();
        for (int j = j0; j < j1; j++) {
            const __m256i *d = (const __m256i *)(dec + 128 * (size_t)j) + fp;
            const __m256i w0 = _mm256_load_si256(d), w1 = _mm256_load_si256(d + 1);
            for (int u = 0; u < T; u++) {
                int32_t q;
                __builtin_memcpy(&q, a[u] + 4 * j, 4);
                const __m256i x = _mm256_set1_epi32(q);
                p[0][u] = _mm256_add_epi16(p[0][u], _mm256_maddubs_epi16(w0, x));
                p[1][u] = _mm256_add_epi16(p[1][u], _mm256_maddubs_epi16(w1, x));
            }
        }
        for (int f = 0; f < 2; f++)
            for (int u = 0; u < T; u++) acc[f][u] = _mm256_add_epi32(acc[f][u], _mm256_madd_epi16(p[f][u], one));
    }
}

static inline __attribute__((always_inline)) void gemm_tokens_avx2(
        const tsar_acts *s, int32_t *out, const uint8_t *dec, int kq, int mb, int t, int T) {
    for (int fp = 0; fp < 4; fp += 2) {
        __m256i acc[2][4];
        for (int f = 0; f < 2; f++)
            for (int u = 0; u < 4; u++) acc[f][u] = _mm256_setzero_si256();
        gemm_fields_avx2(s, dec, kq, t, T, fp, acc);
        for (int u = 0; u < T; u++) {
            const __m256i sum = _mm256_set1_epi32(s->sums[t + u]);
            int32_t *o = out + (size_t)(t + u) * s->w->m + (size_t)mb * 32 + 8 * fp;
            _mm256_storeu_si256((__m256i *)o, _mm256_sub_epi32(acc[0][u], sum));
            _mm256_storeu_si256((__m256i *)(o + 8), _mm256_sub_epi32(acc[1][u], sum));
        }
    }
}

static void gemm_avx2(const tsar_acts *s, int32_t *out, int m0, int m1) {
    const int kq = s->w->k / 4;
#ifndef TSAR_SIM
    uint8_t *dec = aligned_alloc(64, tsar_round_up(128 * (size_t)kq, 64));
    if (!dec) __builtin_trap();
#else
    uint8_t *dec = s->prep;   /* the simulator entry's scratch: TSAR_SIM_GEMM_SCRATCH(k) bytes */
#endif
    for (int mb = m0 / 32; mb < m1 / 32; mb++) {
        decode_block_avx2(s->w->w + (size_t)mb * kq * 32, kq, dec);
        int t = 0;
        for (; t + 4 <= s->n; t += 4) gemm_tokens_avx2(s, out, dec, kq, mb, t, 4);
        if (s->n - t == 3) gemm_tokens_avx2(s, out, dec, kq, mb, t, 3);
        else if (s->n - t == 2) gemm_tokens_avx2(s, out, dec, kq, mb, t, 2);
        else if (s->n - t == 1) gemm_tokens_avx2(s, out, dec, kq, mb, t, 1);
    }
#ifndef TSAR_SIM
    free(dec);
#endif
}

/* GEMV and small N: weight-block-outer, tokens inner (the 32-row block stays in L1 while the
 * tokens stream), tokens in pairs so that each decoded weight vector serves two tokens. */
static void rows_avx2(const tsar_acts *s, int32_t *out, int m0, int m1) {
    if (s->n >= GEMM_MIN_N) { gemm_avx2(s, out, m0, m1); return; }
    const int kq = s->w->k / 4;
    for (int mb = m0 / 32; mb < m1 / 32; mb++) {
        const uint8_t *wb = s->w->w + (size_t)mb * kq * 32;
        int t = 0;
        for (; t + 1 < s->n; t += 2) block_avx2(s, out, wb, kq, mb, t, 1);
        if (t < s->n) block_avx2(s, out, wb, kq, mb, t, 0);
    }
}

/* One 32-row block for ntok (1..4) tokens from t: each loaded and decoded weight vector feeds
 * every token's vpdpbusd (the 32 zmm registers hold the tokens' accumulators). */
AVX512_TARGET static inline __attribute__((always_inline)) void block_avx512(
        const tsar_acts *s, int32_t *out, const uint8_t *wb, int kq, int mb, int t, int ntok) {
    const tsar_weights *w = s->w;
    const __m512i m3 = _mm512_set1_epi8(0x03), mc = _mm512_set1_epi8(0x0c);
    const __m512i half = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    const int8_t *a[4];
    __m512i acc[4][4];
    for (int u = 0; u < 4; u++) {
        a[u] = s->act + s->act_stride * (t + (u < ntok ? u : 0));   /* zero padded past k */
        for (int f = 0; f < 4; f++) acc[u][f] = _mm512_setzero_si512();
    }
    for (int j = 0; j < kq; j += 2) {
        const __m512i v = j + 1 < kq ? _mm512_loadu_si512((const void *)(wb + 32 * j))
            : _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)(wb + 32 * j)));
        const __m512i h = _mm512_srli_epi16(v, 4);
        const __m512i f0 = _mm512_and_si512(v, m3), f1 = _mm512_and_si512(v, mc);
        const __m512i f2 = _mm512_and_si512(h, m3), f3 = _mm512_and_si512(h, mc);
        for (int u = 0; u < ntok; u++) {
            const __m512i x = _mm512_permutexvar_epi32(
                half, _mm512_castsi128_si512(_mm_loadl_epi64((const __m128i *)(a[u] + 4 * j))));
            acc[u][0] = _mm512_dpbusd_epi32(acc[u][0], f0, x);
            acc[u][1] = _mm512_dpbusd_epi32(acc[u][1], f1, x);
            acc[u][2] = _mm512_dpbusd_epi32(acc[u][2], f2, x);
            acc[u][3] = _mm512_dpbusd_epi32(acc[u][3], f3, x);
        }
    }
#define FOLD(A) _mm256_add_epi32(_mm512_castsi512_si256(A), _mm512_extracti64x4_epi64(A, 1))
    for (int u = 0; u < ntok; u++) {
        const __m256i sum = _mm256_set1_epi32(s->sums[t + u]);
        int32_t *o = out + (size_t)(t + u) * w->m + (size_t)mb * 32;
        _mm256_storeu_si256((__m256i *)o, _mm256_sub_epi32(FOLD(acc[u][0]), sum));
        _mm256_storeu_si256((__m256i *)(o + 8), _mm256_sub_epi32(_mm256_srai_epi32(FOLD(acc[u][1]), 2), sum));
        _mm256_storeu_si256((__m256i *)(o + 16), _mm256_sub_epi32(FOLD(acc[u][2]), sum));
        _mm256_storeu_si256((__m256i *)(o + 24), _mm256_sub_epi32(_mm256_srai_epi32(FOLD(acc[u][3]), 2), sum));
    }
#undef FOLD
}

/* Weight-block-outer, tokens inner, three tokens per decoded weight vector (then 2 or 1): three
 * tokens measured faster than four (whose sixteen accumulators crowd the register file). */
AVX512_TARGET static void rows_avx512(const tsar_acts *s, int32_t *out, int m0, int m1) {
    const int kq = s->w->k / 4;
    for (int mb = m0 / 32; mb < m1 / 32; mb++) {
        const uint8_t *wb = s->w->w + (size_t)mb * kq * 32;
        int t = 0;
        for (; t + 3 <= s->n; t += 3) block_avx512(s, out, wb, kq, mb, t, 3);
        if (s->n - t == 2) block_avx512(s, out, wb, kq, mb, t, 2);
        else if (s->n - t == 1) block_avx512(s, out, wb, kq, mb, t, 1);
    }
}

#ifndef TSAR_SIM
const tsar_kernel tsar_kernel_int2 = {
    .row_unit = 32, .prep_size = prep_size, .prep = prep,
    .rows = {[TSAR_ISA_AVX2] = rows_avx2, [TSAR_ISA_AVX512] = rows_avx512, [TSAR_ISA_AVXVNNI] = rows_avxvnni},
    .check = check};
#else
TSAR_SIM_SUM_GEMV(int2)
TSAR_SIM_SUM_ENTRIES(int2_avx512, rows_avx512)
TSAR_SIM_SUM_ENTRIES(int2_avxvnni, rows_avxvnni)
#endif
