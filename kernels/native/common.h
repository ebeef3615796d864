/* Internal helpers shared by the kernels. */
#ifndef TSAR_COMMON_H
#define TSAR_COMMON_H
#include <stddef.h>
#include <stdint.h>
#include <immintrin.h>
#include "api.h"

#define TSAR_ALIGN 64
#define AVX512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))
#define AVXVNNI_TARGET __attribute__((target("avx2,avxvnni")))   /* VEX vpdpbusd ymm (AVX-VNNI) */

/* Per-call activation state. Layout of the workspace (all 64-byte aligned):
 * act  int8 [n][kpad]   quantized activations (or copied from the caller)
 * sums int32[n]         per-token sum of activations
 * prep bytes[n][prep_stride]  kernel-specific per-token data (LUTs, widened activations)
 * acc  int32[n][m]      integer results (float path only) */
typedef struct {
    const tsar_weights *w;
    const int8_t *act;
    int32_t *sums;
    uint8_t *prep;
    size_t act_stride, prep_stride;
    int n;
} tsar_acts;

/* A kernel: prep(t) fills the per-token data for token t; rows() computes out[n][m0..m1). */
typedef struct {
    int row_unit;                                           /* rows are split in multiples of this */
    size_t (*prep_size)(const tsar_weights *w);             /* bytes per token                    */
    void (*prep)(const tsar_acts *s, int t);
    void (*rows[TSAR_NISAS])(const tsar_acts *s, int32_t *out, int m0, int m1);  /* by TSAR_ISA_* */
    int (*check)(const tsar_weights *w);                    /* 0 if the descriptor is usable      */
} tsar_kernel;

extern const tsar_kernel tsar_kernel_tl2, tsar_kernel_tl1, tsar_kernel_i2s, tsar_kernel_dense,
    tsar_kernel_int2, tsar_kernel_trit5, tsar_kernel_tq1_0, tsar_kernel_tq2_0, tsar_kernel_iq1_bn,
    tsar_kernel_iq2_bn;

/* Pieces of the int16 GEMM micro-kernels' assembly (int2.c, dense.c), whose sums live from ymm0 up:
 * zero ymm0-7, and widen sums into the int32 array operand [acc] (32 bytes each, same order) with
 * vpmaddwd by ones (TSAR_ASM_WIDEN_YMM0_7: ones in ymm8, which is overwritten). */
#define TSAR_ASM_ZERO_YMM0_7                                                                       \
    "vpxor %%xmm0, %%xmm0, %%xmm0\n\t" "vpxor %%xmm1, %%xmm1, %%xmm1\n\t"                          \
    "vpxor %%xmm2, %%xmm2, %%xmm2\n\t" "vpxor %%xmm3, %%xmm3, %%xmm3\n\t"                          \
    "vpxor %%xmm4, %%xmm4, %%xmm4\n\t" "vpxor %%xmm5, %%xmm5, %%xmm5\n\t"                          \
    "vpxor %%xmm6, %%xmm6, %%xmm6\n\t" "vpxor %%xmm7, %%xmm7, %%xmm7\n\t"
/* ymmR (16 int16 pair sums) widened with the all-ones int16 vector in ymmONES and added into the
 * int32 vector at byte OFF of %[acc]. */
#define TSAR_ASM_WIDEN_WITH(ONES, R, OFF)                                                          \
    "vpmaddwd %%ymm" #ONES ", %%ymm" #R ", %%ymm" #R "\n\t"                                        \
    "vpaddd " #OFF "(%[acc]), %%ymm" #R ", %%ymm" #R "\n\t" "vmovdqu %%ymm" #R ", " #OFF "(%[acc])\n\t"
#define TSAR_ASM_WIDEN_ONE(R, OFF) TSAR_ASM_WIDEN_WITH(8, R, OFF)
#define TSAR_ASM_WIDEN_YMM0_7                                                                      \
    "vpcmpeqw %%ymm8, %%ymm8, %%ymm8\n\t" "vpsrlw $15, %%ymm8, %%ymm8\n\t"                         \
    TSAR_ASM_WIDEN_ONE(0, 0) TSAR_ASM_WIDEN_ONE(1, 32) TSAR_ASM_WIDEN_ONE(2, 64)                   \
    TSAR_ASM_WIDEN_ONE(3, 96) TSAR_ASM_WIDEN_ONE(4, 128) TSAR_ASM_WIDEN_ONE(5, 160)                \
    TSAR_ASM_WIDEN_ONE(6, 192) TSAR_ASM_WIDEN_ONE(7, 224)

static inline size_t tsar_round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* acc + the dword dot products of u's unsigned bytes with s's signed bytes: the VEX vpdpbusd ymm
 * of AVX-VNNI (_mm256_dpbusd_avx_epi32) with its accumulator tied in place. gcc 12 copies the
 * builtin's accumulator through another register at each use (and spills when a loop carries
 * many), which makes the front end, not the multiply ports, the limit; s may be folded from
 * memory. Only for code that runs where AVX-VNNI does (AVXVNNI_TARGET functions). */
static inline __attribute__((always_inline)) __m256i tsar_dpbusd_avx(__m256i acc, __m256i u, __m256i s) {
    __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u), "xm"(s));
    return acc;
}

static inline int32_t tsar_hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

static inline int32_t tsar_sum_i8(const int8_t *a, int k) {
    int32_t s = 0;
    for (int i = 0; i < k; i++) s += a[i];
    return s;
}

/* Bytes of n tokens' int32 activation sums at the start of a GEMM work area (64-byte multiple). */
static inline size_t tsar_token_sums_size(int n) { return tsar_round_up(sizeof(int32_t) * n, TSAR_ALIGN); }

/* The activation sums of n tokens a[n][k] written to the start of work; returns the bytes after
 * them (tsar_token_sums_size(n) on), where the GEMM kernels keep their scratch. */
static inline uint8_t *tsar_token_sums(const int8_t *a, int k, int n, void *work) {
    int32_t *sums = (int32_t *)work;
    for (int t = 0; t < n; t++) sums[t] = tsar_sum_i8(a + (size_t)t * k, k);
    return (uint8_t *)work + tsar_token_sums_size(n);
}

/* Byte copy and fill for the per-token preparations: libc's in the native build, plain loops under
 * TSAR_SIM, which has no libc (simbuild's -fno-tree-loop-distribute-patterns keeps them loops). */
#ifdef TSAR_SIM
static inline void tsar_copy_bytes(void *dst, const void *src, size_t n) {
    uint8_t *d = (uint8_t *)dst;
    const uint8_t *s = (const uint8_t *)src;
    for (size_t i = 0; i < n; i++) d[i] = s[i];
}
static inline void tsar_zero_bytes(void *dst, size_t n) {
    uint8_t *d = (uint8_t *)dst;
    for (size_t i = 0; i < n; i++) d[i] = 0;
}
#else
#include <string.h>
#define tsar_copy_bytes memcpy
#define tsar_zero_bytes(dst, n) memset((dst), 0, (n))
#endif

/* Simulator entry points (built with -DTSAR_SIM: no libc, no threads; AVX2, and AVX-512 where a
 * kernel's registry entry lists it in sim_isas): GEMV, one token
 * a[k] -> out[m], and GEMM, n tokens a[n][k] -> out[n][m], through the rows function that runs
 * natively. Each kernel file defines static prep_size/prep/check/rows_avx2 and expands one of
 * these (files of two kernels name their functions: TSAR_SIM_PREP_SUM below). LUT kernels take
 * 'work', 64-byte aligned scratch of tsar_sim_NAME_work_size() bytes for their tables; sum kernels
 * need the activation sum for their offset correction; dense takes its row sums
 * (TSAR_SIM_PREP_AUX); trit5 defines TSAR_SIM_PREP_SUM's signatures itself (its work also holds
 * zero-padded activations and its rows' scratch). */
#define TSAR_SIM_LUT_GEMV(NAME)                                                                    \
    unsigned long tsar_sim_##NAME##_work_size(int m, int k, int bm, int bk) {                      \
        const tsar_weights w = {0, 0, m, k, bm, bk};                                               \
        return (unsigned long)prep_size(&w);                                                       \
    }                                                                                              \
    int tsar_sim_##NAME##_gemv(const uint8_t *wp, int m, int k, int bm, int bk, const int8_t *a,   \
                               void *work, int32_t *out) {                                         \
        const tsar_weights w = {wp, 0, m, k, bm, bk};                                              \
        if (check(&w)) return -1;                                                                  \
        const tsar_acts s = {&w, a, 0, (uint8_t *)work, 0, 0, 1};                                  \
        prep(&s, 0);                                                                               \
        rows_avx2(&s, out, 0, m);                                                                  \
        return 0;                                                                                  \
    }                                                                                              \
    /* n tokens a[n][k] -> out[n][m]; work: tsar_sim_NAME_gemm_work_size() bytes, n tables */    \
    unsigned long tsar_sim_##NAME##_gemm_work_size(int m, int k, int bm, int bk, int n) {          \
        const tsar_weights w = {0, 0, m, k, bm, bk};                                               \
        return (unsigned long)(tsar_round_up(prep_size(&w), TSAR_ALIGN) * (size_t)n);              \
    }                                                                                              \
    int tsar_sim_##NAME##_gemm(const uint8_t *wp, int m, int k, int bm, int bk, const int8_t *a,   \
                               int n, void *work, int32_t *out) {                                  \
        const tsar_weights w = {wp, 0, m, k, bm, bk};                                              \
        if (check(&w) || n < 1) return -1;                                                         \
        const tsar_acts s = {&w, a, 0, (uint8_t *)work, (size_t)k,                                 \
                             tsar_round_up(prep_size(&w), TSAR_ALIGN), n};                         \
        for (int t = 0; t < n; t++) prep(&s, t);                                                   \
        rows_avx2(&s, out, 0, m);                                                                  \
        return 0;                                                                                  \
    }

#define TSAR_SIM_GEMM_SCRATCH(k) ((size_t)32 * (k))
#define TSAR_SIM_SUM_GEMV(NAME) TSAR_SIM_SUM_ENTRIES(NAME, rows_avx2)
/* The same entry points through another rows function (NAME then names the ISA variant too:
 * TSAR_SIM_SUM_ENTRIES(int2_avx512, rows_avx512) defines tsar_sim_int2_avx512_gemv...). */
#define TSAR_SIM_SUM_ENTRIES(NAME, ROWS)                                                           \
    int tsar_sim_##NAME##_gemv(const uint8_t *wp, int m, int k, const int8_t *a, int32_t *out) {   \
        const tsar_weights w = {wp, 0, m, k, 0, 0};                                                \
        if (check(&w)) return -1;                                                                  \
        int32_t sum = tsar_sum_i8(a, k);                                                           \
        const tsar_acts s = {&w, a, &sum, 0, 0, 0, 1};                                             \
        ROWS(&s, out, 0, m);                                                                       \
        return 0;                                                                                  \
    }                                                                                              \
    /* n tokens a[n][k] -> out[n][m]; work (64-byte aligned, tsar_sim_NAME_gemm_work_size()     \
     * bytes): n int32 sums rounded up to 64 bytes, then TSAR_SIM_GEMM_SCRATCH(k) bytes that the   \
     * rows function may use (as prep). m, bm and bk are unused: one signature for every kernel. */ \
    unsigned long tsar_sim_##NAME##_gemm_work_size(int m, int k, int bm, int bk, int n) {          \
        (void)m; (void)bm; (void)bk;                                                               \
        return (unsigned long)(tsar_token_sums_size(n) + TSAR_SIM_GEMM_SCRATCH(k));                \
    }                                                                                              \
    int tsar_sim_##NAME##_gemm(const uint8_t *wp, int m, int k, const int8_t *a, int n,            \
                               void *work, int32_t *out) {                                         \
        const tsar_weights w = {wp, 0, m, k, 0, 0};                                                \
        if (check(&w) || n < 1) return -1;                                                         \
        uint8_t *scratch = tsar_token_sums(a, k, n, work);                                         \
        const tsar_acts s = {&w, a, (int32_t *)work, scratch, (size_t)k, 0, n};                    \
        ROWS(&s, out, 0, m);                                                                       \
        return 0;                                                                                  \
    }


/* Kernels that both prepare each token's activations into scratch (PREP, PREP_SIZE bytes a token)
 * and subtract its activation sum (tq.c, iqbn.c: two kernels a file, so the functions are named).
 * GEMV: work is 64-byte aligned scratch of tsar_sim_NAME_work_size() bytes (one token's prepared
 * activations). GEMM: work (tsar_sim_NAME_gemm_work_size() bytes) holds n int32 sums rounded up to
 * 64 bytes, then n prepared tokens, each rounded up to 64 bytes. Signatures: the sum kernels', the
 * GEMV with work; m, bm and bk of the size queries only as the other kernels take them. */
#define TSAR_SIM_PREP_SUM(NAME, CHECK, PREP_SIZE, PREP, ROWS)                                      \
    unsigned long tsar_sim_##NAME##_work_size(int m, int k, int bm, int bk) {                      \
        const tsar_weights w = {0, 0, m, k, bm, bk};                                               \
        return (unsigned long)PREP_SIZE(&w);                                                       \
    }                                                                                              \
    int tsar_sim_##NAME##_gemv(const uint8_t *wp, int m, int k, const int8_t *a, void *work,       \
                               int32_t *out) {                                                     \
        const tsar_weights w = {wp, 0, m, k, 0, 0};                                                \
        if (CHECK(&w)) return -1;                                                                  \
        int32_t sum = tsar_sum_i8(a, k);                                                           \
        const tsar_acts s = {&w, a, &sum, (uint8_t *)work, 0, 0, 1};                               \
        PREP(&s, 0);                                                                               \
        ROWS(&s, out, 0, m);                                                                       \
        return 0;                                                                                  \
    }                                                                                              \
    unsigned long tsar_sim_##NAME##_gemm_work_size(int m, int k, int bm, int bk, int n) {          \
        const tsar_weights w = {0, 0, m, k, bm, bk};                                               \
        return (unsigned long)(tsar_token_sums_size(n)                                             \
                               + tsar_round_up(PREP_SIZE(&w), TSAR_ALIGN) * (size_t)n);            \
    }                                                                                              \
    int tsar_sim_##NAME##_gemm(const uint8_t *wp, int m, int k, const int8_t *a, int n,            \
                               void *work, int32_t *out) {                                         \
        const tsar_weights w = {wp, 0, m, k, 0, 0};                                                \
        if (CHECK(&w) || n < 1) return -1;                                                         \
        uint8_t *prep = tsar_token_sums(a, k, n, work);                                            \
        const tsar_acts s = {&w, a, (int32_t *)work, prep, (size_t)k, tsar_round_up(PREP_SIZE(&w), TSAR_ALIGN), n}; \
        for (int t = 0; t < n; t++) PREP(&s, t);                                                   \
        ROWS(&s, out, 0, m);                                                                       \
        return 0;                                                                                  \
    }

/* Kernels that read per-row weight sums (tsar_weights.aux) and prepare each token's activations
 * into scratch: dense, whose activations are offset to u8 (a + 128), so that the rows subtract
 * 128 times the row sum. The entries take the whole weight descriptor, its fields in order:
 *     unsigned long tsar_sim_NAME_work_size(int m, int k, int bm, int bk);
 *     int tsar_sim_NAME_gemv(const uint8_t *w, const int32_t *aux, int m, int k, int bm, int bk,
 *                            const int8_t *a, void *work, int32_t *out);
 *     unsigned long tsar_sim_NAME_gemm_work_size(int m, int k, int bm, int bk, int n);
 *     int tsar_sim_NAME_gemm(const uint8_t *w, const int32_t *aux, int m, int k, int bm, int bk,
 *                            const int8_t *a, int n, void *work, int32_t *out);
 * aux: m int32 row sums; bm, bk as the packer chose them (dense: bm unused, bk its int16 flush
 * step). work (64-byte aligned): n prepared tokens, each rounded up to 64 bytes (GEMV: one). The
 * prep reads a with aligned loads, as it reads the native workspace's copy: a must be 32-byte
 * aligned (else -1), and k keeps the next token's row aligned too (dense: k % 64 == 0). */
#define TSAR_SIM_PREP_AUX(NAME, ROWS)                                                              \
    unsigned long tsar_sim_##NAME##_work_size(int m, int k, int bm, int bk) {                      \
        const tsar_weights w = {0, 0, m, k, bm, bk};                                               \
        return (unsigned long)prep_size(&w);                                                       \
    }                                                                                              \
    int tsar_sim_##NAME##_gemv(const uint8_t *wp, const int32_t *aux, int m, int k, int bm, int bk, \
                               const int8_t *a, void *work, int32_t *out) {                        \
        const tsar_weights w = {wp, aux, m, k, bm, bk};                                            \
        if (check(&w) || ((uintptr_t)a & 31)) return -1;                                           \
        const tsar_acts s = {&w, a, 0, (uint8_t *)work, 0, 0, 1};                                 \
        prep(&s, 0);                                                                               \
        ROWS(&s, out, 0, m);                                                                       \
        return 0;                                                                                  \
    }                                                                                              \
    unsigned long tsar_sim_##NAME##_gemm_work_size(int m, int k, int bm, int bk, int n) {          \
        const tsar_weights w = {0, 0, m, k, bm, bk};                                               \
        return (unsigned long)(tsar_round_up(prep_size(&w), TSAR_ALIGN) * (size_t)n);              \
    }                                                                                              \
    int tsar_sim_##NAME##_gemm(const uint8_t *wp, const int32_t *aux, int m, int k, int bm, int bk, \
                               const int8_t *a, int n, void *work, int32_t *out) {                 \
        const tsar_weights w = {wp, aux, m, k, bm, bk};                                            \
        if (check(&w) || n < 1 || ((uintptr_t)a & 31)) return -1;                                  \
        const tsar_acts s = {&w, a, 0, (uint8_t *)work, (size_t)k,                                 \
                             tsar_round_up(prep_size(&w), TSAR_ALIGN), n};                         \
        for (int t = 0; t < n; t++) prep(&s, t);                                                   \
        ROWS(&s, out, 0, m);                                                                       \
        return 0;                                                                                  \
    }

#endif
