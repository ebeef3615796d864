/* Dense int8 GEMV/GEMM: weights int8 (M, K) row-major with |w| <= 64, per-row sums in aux.
 * Activations are offset to u8 (a + 128) once per token, so pmaddubsw / vpdpbusd take them as the
 * unsigned operand; the result is sum((a + 128) * w) - 128 * rowsum(w). AVX2 accumulates int16 pair
 * sums for 'bk' steps (chosen at pack time so that bk * 2 * 255 * max|w| <= 32767), then widens;
 * AVX-VNNI and AVX-512 VNNI accumulate int32 with vpdpbusd (bk unused). */
#include "common.h"

/* GEMV one row at a time: interleaved row streams defeat the hardware prefetcher from DRAM. */
#ifndef ROWS
#define ROWS 1
#endif

static int check(const tsar_weights *w) { return w->k % 64 != 0 || w->bk < 1 || !w->aux; }
static size_t prep_size(const tsar_weights *w) { return (size_t)w->k; }

static void prep(const tsar_acts *s, int t) {
    const int8_t *a = s->act + s->act_stride * t;
    uint8_t *u = s->prep + s->prep_stride * t;
    const __m256i off = _mm256_set1_epi8((char)0x80);
    for (int i = 0; i < s->w->k; i += 32)
        _mm256_store_si256((__m256i *)(u + i), _mm256_xor_si256(_mm256_load_si256((const __m256i *)(a + i)), off));
}

static void gemv_avx2(const tsar_acts *s, int32_t *out, int m0, int m1) {
    const tsar_weights *w = s->w;
    const size_t K = (size_t)w->k;
    const int steps = w->k / 32, flush = w->bk;
    const __m256i one = _mm256_set1_epi16(1);
    for (int r = m0; r < m1; r += ROWS) {
        const int R = m1 - r < ROWS ? m1 - r : ROWS;
        for (int t = 0; t < s->n; t++) {
            const uint8_t *u = s->prep + s->prep_stride * t;
            __m256i acc[ROWS];
            for (int i = 0; i < ROWS; i++) acc[i] = _mm256_setzero_si256();
            for (int j0 = 0; j0 < steps; j0 += flush) {
                const int j1 = j0 + flush < steps ? j0 + flush : steps;
                __m256i s16[ROWS];
                for (int i = 0; i < ROWS; i++) s16[i] = _mm256_setzero_si256();
                for (int j = j0; j < j1; j++) {
                    const __m256i x = _mm256_load_si256((const __m256i *)(u + 32 * j));
                    for (int i = 0; i < ROWS; i++) {
                        if (i >= R) break;
                        const __m256i wv = _mm256_loadu_si256((const __m256i *)(w->w + (r + i) * K + 32 * j));
                        s16[i] = _mm256_add_epi16(s16[i], _mm256_maddubs_epi16(x, wv));
                    }
                }
                for (int i = 0; i < ROWS; i++) acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(s16[i], one));
            }
            for (int i = 0; i < R; i++)
                out[(size_t)t * w->m + r + i] = tsar_hsum_epi32(acc[i]) - 128 * w->aux[r + i];
        }
    }
}

/* Horizontal sums of 8 int32 vectors: lane i of the result is the sum of v[i]'s lanes. */
static inline __m256i hsum8_epi32(const __m256i v[8]) {
    const __m256i a = _mm256_hadd_epi32(v[0], v[1]), b = _mm256_hadd_epi32(v[2], v[3]);
    const __m256i c = _mm256_hadd_epi32(v[4], v[5]), d = _mm256_hadd_epi32(v[6], v[7]);
    const __m256i ab = _mm256_hadd_epi32(a, b), cd = _mm256_hadd_epi32(c, d);
    /* ab = [v0 v1 v2 v3 | v0 v1 v2 v3] partial halves, cd likewise for v4..v7 */
    return _mm256_add_epi32(_mm256_permute2x128_si256(ab, cd, 0x20), _mm256_permute2x128_si256(ab, cd, 0x31));
}

/* GEMM (AVX2), 6 rows x 2 tokens per pass over K: each loaded weight vector serves two tokens and
 * each activation vector six rows; the six rows (15 KiB at K = 2560) stay in L1 while the token
 * pairs stream from L2. The loop is in assembly, one weight register reused for each row in turn
 * (ymm0-11 = int16 pair sums of row i, token u at 2 i + u; ymm12-13 = offset activations;
 * ymm14 = weights; ymm15 = products). Per 32 columns: 8 loads, 12 vpmaddubsw, 12 vpaddw and the
 * fused add + jnz, 33 macro-ops for the 6 cycles of the two multiply ports: the 6-wide dispatch
 * keeps 3 slots of slack (a 4 x 2 tile, 23 macro-ops for 4 cycles, has none and measured 70 % of
 * the int8 peak against 76 %). The int16 sums are widened into int32 'acc' (12 vectors of 8 lanes,
 * same order) every 'flush' steps, as bk bounds them. */
#define DENSE_ROW6(I, A, B)                                                                        \
    "vmovdqu (%[w" #I "],%[j]), %%ymm14\n\t"                                                       \
    "vpmaddubsw %%ymm14, %%ymm12, %%ymm15\n\t" "vpaddw %%ymm15, %%ymm" #A ", %%ymm" #A "\n\t"     \
    "vpmaddubsw %%ymm14, %%ymm13, %%ymm15\n\t" "vpaddw %%ymm15, %%ymm" #B ", %%ymm" #B "\n\t"
#define DENSE_WIDEN(R, OFF) TSAR_ASM_WIDEN_WITH(15, R, OFF)
static void tile6x2_avx2(const uint8_t *const w[6], const uint8_t *x0, const uint8_t *x1, long steps,
                         long flush, __m256i acc[12]) {
    for (long j0 = 0; j0 < steps; j0 += flush) {
        /* j runs from -bytes to 0 over pointers advanced by jend, so add + jnz close the loop */
        const long jend = 32 * (j0 + flush < steps ? j0 + flush : steps);
        long j = 32 * j0 - jend;
        __asm__ volatile(
            TSAR_ASM_ZERO_YMM0_7
            "vpxor %%xmm8, %%xmm8, %%xmm8\n\t" "vpxor %%xmm9, %%xmm9, %%xmm9\n\t"
            "vpxor %%xmm10, %%xmm10, %%xmm10\n\t" "vpxor %%xmm11, %%xmm11, %%xmm11\n\t"
            ".p2align 4\n"
            "1:\n\t"
            "vmovdqa (%[x0],%[j]), %%ymm12\n\t"
            "vmovdqa (%[x1],%[j]), %%ymm13\n\t"
            DENSE_ROW6(0, 0, 1) DENSE_ROW6(1, 2, 3) DENSE_ROW6(2, 4, 5)
            DENSE_ROW6(3, 6, 7) DENSE_ROW6(4, 8, 9) DENSE_ROW6(5, 10, 11)
            "addq $32, %[j]\n\t"
            "jnz 1b\n\t"
            "vpcmpeqw %%ymm15, %%ymm15, %%ymm15\n\t" "vpsrlw $15, %%ymm15, %%ymm15\n\t"
            DENSE_WIDEN(0, 0) DENSE_WIDEN(1, 32) DENSE_WIDEN(2, 64) DENSE_WIDEN(3, 96)
            DENSE_WIDEN(4, 128) DENSE_WIDEN(5, 160) DENSE_WIDEN(6, 192) DENSE_WIDEN(7, 224)
            DENSE_WIDEN(8, 256) DENSE_WIDEN(9, 288) DENSE_WIDEN(10, 320) DENSE_WIDEN(11, 352)
            : [j] "+r"(j)
            : [w0] "r"(w[0] + jend), [w1] "r"(w[1] + jend), [w2] "r"(w[2] + jend), [w3] "r"(w[3] + jend),
              [w4] "r"(w[4] + jend), [w5] "r"(w[5] + jend), [x0] "r"(x0 + jend), [x1] "r"(x1 + jend),
              [acc] "r"(acc)
            : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",
              "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "cc", "memory");
    }
}
#undef DENSE_ROW6
#undef DENSE_WIDEN

/* GEMM (AVX2): 6 x 2 tiles over every 6 rows and token pair; an odd last token and the last
 * m mod 6 rows run the GEMV loop. */
static void gemm_avx2(const tsar_acts *s, int32_t *out, int m0, int m1) {
    const tsar_weights *w = s->w;
    const size_t K = (size_t)w->k;
    const long steps = w->k / 32, flush = w->bk;
    int r = m0;
    for (; r + 6 <= m1; r += 6) {
        const uint8_t *wr[6];
        for (int i = 0; i < 6; i++) wr[i] = w->w + (size_t)(r + i) * K;
        int t = 0;
        for (; t + 2 <= s->n; t += 2) {
            const uint8_t *x0 = s->prep + s->prep_stride * t, *x1 = x0 + s->prep_stride;
            __m256i acc[16];  /* 12 used; the last 4 stay zero for the second 8-way sum */
            for (int i = 0; i < 16; i++) acc[i] = _mm256_setzero_si256();
            tile6x2_avx2(wr, x0, x1, steps, flush, acc);
            int32_t sums[16];  /* sums[q]: the lanes of acc[q] added */
            _mm256_storeu_si256((__m256i *)sums, hsum8_epi32(acc));
            _mm256_storeu_si256((__m256i *)(sums + 8), hsum8_epi32(acc + 8));
            for (int i = 0; i < 6; i++)
                for (int u = 0; u < 2; u++)
                    out[(size_t)(t + u) * w->m + r + i] = sums[2 * i + u] - 128 * w->aux[r + i];
        }
        if (t < s->n) {
            tsar_acts rest = *s;
            rest.n = 1;
            rest.prep = s->prep + s->prep_stride * t;
            gemv_avx2(&rest, out + (size_t)t * w->m, r, r + 6);
        }
    }
    if (r < m1) gemv_avx2(s, out, r, m1);
}

/* Horizontal sums of 16 int32 vectors: lane 4 g + i of the result is the sum of v[g][i]'s lanes (pairwise
 * unpack-and-add within 128-bit lanes, then across them: ~45 operations instead of 16 reductions). */
AVX512_TARGET static inline __m512i hsum16_epi32(const __m512i v[4][4]) {
    __m512i q[4];
    for (int g = 0; g < 4; g++) {
        const __m512i *x = v[g];
        const __m512i a = _mm512_add_epi32(_mm512_unpacklo_epi32(x[0], x[1]), _mm512_unpackhi_epi32(x[0], x[1]));
        const __m512i b = _mm512_add_epi32(_mm512_unpacklo_epi32(x[2], x[3]), _mm512_unpackhi_epi32(x[2], x[3]));
        q[g] = _mm512_add_epi32(_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b));
    }   /* q[g]: in each 128-bit lane L, the lane-L sums of v[4g .. 4g + 3] */
    const __m512i u01 = _mm512_add_epi32(_mm512_shuffle_i32x4(q[0], q[1], 0x88), _mm512_shuffle_i32x4(q[0], q[1], 0xdd));
    const __m512i u23 = _mm512_add_epi32(_mm512_shuffle_i32x4(q[2], q[3], 0x88), _mm512_shuffle_i32x4(q[2], q[3], 0xdd));
    return _mm512_add_epi32(_mm512_shuffle_i32x4(u01, u23, 0x88), _mm512_shuffle_i32x4(u01, u23, 0xdd));
}

/* GEMM micro-kernel, AVX-512 VNNI: nr (<= 4) rows x nt (<= 4) tokens per pass over K, so each
 * loaded weight vector serves nt tokens and each activation vector nr rows; the 16 independent
 * vpdpbusd chains hide its latency (one chain per row, as the GEMV has, is latency-bound). */
AVX512_TARGET static inline __attribute__((always_inline)) void tile_avx512(
        const tsar_acts *s, int32_t *out, int r, int t, int nr, int nt) {
    const tsar_weights *w = s->w;
    const size_t K = (size_t)w->k;
    __m512i acc[4][4];
    const uint8_t *u[4];
    for (int i = 0; i < 4; i++)
        for (int q = 0; q < 4; q++) acc[i][q] = _mm512_setzero_si512();
    for (int q = 0; q < 4; q++) u[q] = s->prep + s->prep_stride * (t + (q < nt ? q : 0));
    for (size_t j = 0; j < K; j += 64) {
        __m512i x[4];
        for (int q = 0; q < nt; q++) x[q] = _mm512_load_si512((const void *)(u[q] + j));
        for (int i = 0; i < nr; i++) {
            const __m512i wv = _mm512_loadu_si512((const void *)(w->w + (r + i) * K + j));
            for (int q = 0; q < nt; q++) acc[i][q] = _mm512_dpbusd_epi32(acc[i][q], x[q], wv);
        }
    }
    int32_t sums[16];
    _mm512_storeu_si512((void *)sums, hsum16_epi32(acc));
    for (int i = 0; i < nr; i++)
        for (int q = 0; q < nt; q++)
            out[(size_t)(t + q) * w->m + r + i] = sums[4 * i + q] - 128 * w->aux[r + i];
}

AVX512_TARGET static void rows_avx512(const tsar_acts *s, int32_t *out, int m0, int m1) {
    const tsar_weights *w = s->w;
    const size_t K = (size_t)w->k;
    if (s->n > 1) {  /* GEMM: 4 x 4 tiles (rows stay in L1/L2 while the tokens stream) */
        for (int r = m0; r < m1; r += 4) {
            const int nr = m1 - r < 4 ? m1 - r : 4;
            int t = 0;
            for (; t + 4 <= s->n; t += 4) {
                if (nr == 4) tile_avx512(s, out, r, t, 4, 4);
                else tile_avx512(s, out, r, t, nr, 4);
            }
            for (; t < s->n; t++) {
                if (nr == 4) tile_avx512(s, out, r, t, 4, 1);
                else tile_avx512(s, out, r, t, nr, 1);
            }
        }
        return;
    }
    for (int r = m0; r < m1; r += ROWS) {
        const int R = m1 - r < ROWS ? m1 - r : ROWS;
        for (int t = 0; t < s->n; t++) {
            const uint8_t *u = s->prep + s->prep_stride * t;
            __m512i acc[ROWS];
            for (int i = 0; i < ROWS; i++) acc[i] = _mm512_setzero_si512();
            for (size_t j = 0; j < K; j += 64) {
                const __m512i x = _mm512_load_si512((const void *)(u + j));
                for (int i = 0; i < ROWS; i++) {
                    if (i >= R) break;
                    acc[i] = _mm512_dpbusd_epi32(acc[i], x, _mm512_loadu_si512((const void *)(w->w + (r + i) * K + j)));
                }
            }
            for (int i = 0; i < R; i++)
                out[(size_t)t * w->m + r + i] = _mm512_reduce_add_epi32(acc[i]) - 128 * w->aux[r + i];
        }
    }
}

static void rows_avx2(const tsar_acts *s, int32_t *out, int m0, int m1) {
    if (s->n >= 4) gemm_avx2(s, out, m0, m1);
    else gemv_avx2(s, out, m0, m1);
}

/* AVX-VNNI (VEX vpdpbusd ymm): the AVX2 structure (GEMV a row at a time; GEMM in 6 x 2 tiles) with
 * each vpmaddubsw + vpaddw pair and its int16 window replaced by one vpdpbusd into int32, offset
 * activations as the unsigned operand and weights as the signed one. vpdpbusd has a latency of
 * ~5 cycles and issues two a cycle, so a single chain per row would run at a tenth of its rate: the
 * GEMV spreads each row over VNNI_CHAINS accumulators (consecutive 32-column steps in turn), the
 * GEMM tile's twelve (row, token) chains are independent already. */
#define VNNI_CHAINS 8

AVXVNNI_TARGET static void gemv_avxvnni(const tsar_acts *s, int32_t *out, int m0, int m1) {
    const tsar_weights *w = s->w;
    const size_t K = (size_t)w->k;
    const int steps = w->k / 32;   /* even: k is a multiple of 64 */
    for (int r = m0; r < m1; r++) {
        const uint8_t *wr = w->w + (size_t)r * K;
        for (int t = 0; t < s->n; t++) {
            const uint8_t *u = s->prep + s->prep_stride * t;
            __m256i acc[VNNI_CHAINS];
            for (int i = 0; i < VNNI_CHAINS; i++) acc[i] = _mm256_setzero_si256();
            int j = 0;
            for (; j + VNNI_CHAINS <= steps; j += VNNI_CHAINS)
                for (int i = 0; i < VNNI_CHAINS; i++)
                    acc[i] = tsar_dpbusd_avx(
                        acc[i], _mm256_load_si256((const __m256i *)(u + 32 * (j + i))),
                        _mm256_loadu_si256((const __m256i *)(wr + 32 * (j + i))));
            for (; j < steps; j += 2)
                for (int i = 0; i < 2; i++)
                    acc[i] = tsar_dpbusd_avx(
                        acc[i], _mm256_load_si256((const __m256i *)(u + 32 * (j + i))),
                        _mm256_loadu_si256((const __m256i *)(wr + 32 * (j + i))));
            for (int i = VNNI_CHAINS / 2; i >= 1; i /= 2)
                for (int q = 0; q < i; q++) acc[q] = _mm256_add_epi32(acc[q], acc[q + i]);
            out[(size_t)t * w->m + r] = tsar_hsum_epi32(acc[0]) - 128 * w->aux[r];
        }
    }
}

/* 6 rows x 2 tokens over K, in assembly as the AVX2 tile (from C, gcc 12 copies the builtin's twelve
 * accumulators through other registers and the stack every step; with tsar_dpbusd_avx it still
 * loads each weight vector twice and copies one sum): ymm0-11 = int32 sums of row i, token u at
 * 2 i + u, twelve independent vpdpbusd chains, each updated once in the six cycles of a step's
 * twelve (latency ~5); ymm12-13 = offset activations; ymm14 = weights. Per 32 columns: 8 loads,
 * 12 vpdpbusd and the fused add + jnz (21 macro-ops against the AVX2 tile's 33). The sums go to
 * acc[0..12) (acc[12..16) zeroed for the second 8-way sum). */
#define DENSE_VNNI_ROW6(I, A, B)                                                                   \
    "vmovdqu (%[w" #I "],%[j]), %%ymm14\n\t"                                                       \
    "%{vex%} vpdpbusd %%ymm14, %%ymm12, %%ymm" #A "\n\t"                                           \
    "%{vex%} vpdpbusd %%ymm14, %%ymm13, %%ymm" #B "\n\t"
#define DENSE_VNNI_STORE(R, OFF) "vmovdqu %%ymm" #R ", " #OFF "(%[acc])\n\t"
AVXVNNI_TARGET static void tile6x2_avxvnni(const uint8_t *const w[6], const uint8_t *x0, const uint8_t *x1,
                                           long steps, __m256i acc[16]) {
    const long jend = 32 * steps;
    long j = -jend;   /* to 0 over pointers advanced by jend: add + jnz close the loop */
    __asm__ volatile(
        TSAR_ASM_ZERO_YMM0_7
        "vpxor %%xmm8, %%xmm8, %%xmm8\n\t" "vpxor %%xmm9, %%xmm9, %%xmm9\n\t"
        "vpxor %%xmm10, %%xmm10, %%xmm10\n\t" "vpxor %%xmm11, %%xmm11, %%xmm11\n\t"
        ".p2align 4\n"
        "1:\n\t"
        "vmovdqa (%[x0],%[j]), %%ymm12\n\t"
        "vmovdqa (%[x1],%[j]), %%ymm13\n\t"
        DENSE_VNNI_ROW6(0, 0, 1) DENSE_VNNI_ROW6(1, 2, 3) DENSE_VNNI_ROW6(2, 4, 5)
        DENSE_VNNI_ROW6(3, 6, 7) DENSE_VNNI_ROW6(4, 8, 9) DENSE_VNNI_ROW6(5, 10, 11)
        "addq $32, %[j]\n\t"
        "jnz 1b\n\t"
        DENSE_VNNI_STORE(0, 0) DENSE_VNNI_STORE(1, 32) DENSE_VNNI_STORE(2, 64) DENSE_VNNI_STORE(3, 96)
        DENSE_VNNI_STORE(4, 128) DENSE_VNNI_STORE(5, 160) DENSE_VNNI_STORE(6, 192) DENSE_VNNI_STORE(7, 224)
        DENSE_VNNI_STORE(8, 256) DENSE_VNNI_STORE(9, 288) DENSE_VNNI_STORE(10, 320) DENSE_VNNI_STORE(11, 352)
        "vpxor %%xmm0, %%xmm0, %%xmm0\n\t"
        DENSE_VNNI_STORE(0, 384) DENSE_VNNI_STORE(0, 416) DENSE_VNNI_STORE(0, 448) DENSE_VNNI_STORE(0, 480)
        : [j] "+r"(j)
        : [w0] "r"(w[0] + jend), [w1] "r"(w[1] + jend), [w2] "r"(w[2] + jend), [w3] "r"(w[3] + jend),
          [w4] "r"(w[4] + jend), [w5] "r"(w[5] + jend), [x0] "r"(x0 + jend), [x1] "r"(x1 + jend),
          [acc] "r"(acc)
        : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",
          "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "cc", "memory");
}
#undef DENSE_VNNI_ROW6
#undef DENSE_VNNI_STORE

AVXVNNI_TARGET static void gemm_avxvnni(const tsar_acts *s, int32_t *out, int m0, int m1) {
    const tsar_weights *w = s->w;
    const size_t K = (size_t)w->k;
    const int steps = w->k / 32;
    int r = m0;
    for (; r + 6 <= m1; r += 6) {
        const uint8_t *wr[6];
        for (int i = 0; i < 6; i++) wr[i] = w->w + (size_t)(r + i) * K;
        int t = 0;
        for (; t + 2 <= s->n; t += 2) {
            const uint8_t *x0 = s->prep + s->prep_stride * t, *x1 = x0 + s->prep_stride;
            __m256i acc[16];
            tile6x2_avxvnni(wr, x0, x1, steps, acc);
            int32_t sums[16];
            _mm256_storeu_si256((__m256i *)sums, hsum8_epi32(acc));
            _mm256_storeu_si256((__m256i *)(sums + 8), hsum8_epi32(acc + 8));
            for (int i = 0; i < 6; i++)
                for (int u = 0; u < 2; u++)
                    out[(size_t)(t + u) * w->m + r + i] = sums[2 * i + u] - 128 * w->aux[r + i];
        }
        if (t < s->n) {
            tsar_acts rest = *s;
            rest.n = 1;
            rest.prep = s->prep + s->prep_stride * t;
            gemv_avxvnni(&rest, out + (size_t)t * w->m, r, r + 6);
        }
    }
    if (r < m1) gemv_avxvnni(s, out, r, m1);
}

AVXVNNI_TARGET static void rows_avxvnni(const tsar_acts *s, int32_t *out, int m0, int m1) {
    if (s->n >= 4) gemm_avxvnni(s, out, m0, m1);
    else gemv_avxvnni(s, out, m0, m1);
}

#ifndef TSAR_SIM
const tsar_kernel tsar_kernel_dense = {
    .row_unit = ROWS, .prep_size = prep_size, .prep = prep,
    .rows = {[TSAR_ISA_AVX2] = rows_avx2, [TSAR_ISA_AVX512] = rows_avx512, [TSAR_ISA_AVXVNNI] = rows_avxvnni},
    .check = check};
#else
TSAR_SIM_PREP_AUX(dense, rows_avx2)
TSAR_SIM_PREP_AUX(dense_avxvnni, rows_avxvnni)
TSAR_SIM_PREP_AUX(dense_avx512, rows_avx512)
#endif
