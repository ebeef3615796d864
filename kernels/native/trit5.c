/* 5 trits per byte (see tsar/kernels/formats/trit5.py): the byte of a row and a group of five
 * columns holds v = sum_i w_i 3^i (i = 0..4) in sign-magnitude with the magnitude offset by 3,
 * b = [v < 0] << 7 | (|v| + 3); weights stored [M/32][kp/20][32 rows][4 groups], so that the dword
 * of a row holds four consecutive groups (a vpdpbusd lane). The result is sum_i t_i a_i - sum(a)
 * with the codes t_i = w_i + 1 (0, 1, 2). Per token, prep stores the activations in digit order:
 * dword 5q + i holds a[5(4q + j) + i] for j = 0..3, the columns that digit i of the dword's four
 * groups multiplies.
 *
 * AVX-512 (VBMI + VNNI): the digits come from two table lookups and no arithmetic on them. A
 * 64-byte tile (16 rows x 4 groups) gives, by one vpermt2b on the 7-bit magnitude index, the four
 * low codes packed in 2-bit fields, f = t0 | t1 << 2 | t2 << 4 | t3 << 6, mirrored where bit 7 is
 * set (0xAA - f: 2 - t in every field); and by one vpermb on b >> 2 (sign and index / 4: the offset
 * puts |v| >= 41 at index 44) the top code. vpdpbusd then multiplies f & 3, f & 0xC, f & 0x30 and
 * f & 0xC0 (the codes times 1, 4, 16, 64, each in its own int32 sum, shifted back exactly at the
 * end) and the top code with the broadcast activation dwords: 15 instructions per 320
 * multiply-adds and nothing to widen (the earlier int16 table lookups, after lut_mm, took 9 per
 * 160, two of them vpermt2w at one per two cycles on Intel cores, and a widening every 51
 * groups). GEMM (n >= GEMM_MIN_N): each 32-row
 * block is decoded once into plain codes and a register-blocked vpdpbusd kernel (32 rows x 12
 * tokens, 24 int32 sums, two products per load) runs over it in L1-sized chunks of steps.
 * Without VBMI (Skylake-SP, Cascade Lake) the AVX-512 level runs the AVX2 rows.
 *
 * AVX2 (decode): u = v + 121 = sum_i t_i 3^i in 16-bit lanes; with q_0 = u, q_{i+1} = q_i / 3
 * (vpmulhuw), sum_i t_i a_i = sum_i q_i c_i where c_0 = a_0, c_i = a_i - 3 a_{i-1} (telescoping,
 * q_5 = 0), the products summed into int32 by vpmaddwd (no int16 sums). Tokens in pairs share the
 * decode. AVX-VNNI: the same with vpdpwssd (product and sum in one instruction). */
#include "common.h"

#define VBMI_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")))

#define QUAD_BYTES 128          /* one quad (4 groups) of a 32-row block */
#define GEMM_MIN_N 4

static int check(const tsar_weights *w) { return w->m % 32 != 0; }
static inline int quads(const tsar_weights *w) { return (w->k + 19) / 20; }

/* The rows functions' scratch, bytes by what they hold: the int16 coefficients of n tokens (AVX2,
 * AVX-VNNI); the AVX-512 GEMM's decoded 32-row block, its token groups' activation dwords (n4: n
 * rounded up to 4) and the groups' int32 sums (ng groups of up to 12 tokens). */
static inline size_t coef_bytes(int nq, int n) { return sizeof(int16_t) * 20 * (size_t)nq * n + 64; }
static inline size_t dec_bytes(int nq) { return (size_t)640 * nq + TSAR_ALIGN; }
static inline size_t ail_bytes(int nq, int n4) { return sizeof(int32_t) * 5 * (size_t)nq * n4 + TSAR_ALIGN; }
static inline size_t acc_bytes(int ng) { return 64 * 24 * (size_t)ng; }

/* Scratch of 'bytes' (rounded up to 64) for the rows of s: aligned_alloc natively; under TSAR_SIM,
 * which has no libc, the simulator entry's work after the n prepared tokens, taken in order
 * (*used: the bytes taken so far; sim_work_size() counts them). */
#ifndef TSAR_SIM
#include <stdlib.h>
static inline void *scratch_alloc(const tsar_acts *s, size_t *used, size_t bytes) {
    (void)s; (void)used;
    void *p = aligned_alloc(TSAR_ALIGN, tsar_round_up(bytes, TSAR_ALIGN));
    if (!p) __builtin_trap();
    return p;
}
#define scratch_free free
#else
static inline void *scratch_alloc(const tsar_acts *s, size_t *used, size_t bytes) {
    uint8_t *p = s->prep + s->prep_stride * (size_t)s->n + *used;
    *used += tsar_round_up(bytes, TSAR_ALIGN);
    return p;
}
#define scratch_free(p) ((void)(p))
#endif

static size_t prep_size(const tsar_weights *w) { return (size_t)quads(w) * 20 + 16; }

/* Activations in digit order: out[4i + j] = in[5j + i] for each 20 columns (i: digit, j: group). The
 * activation row is zero padded to its stride, which is >= 20 * quads. */
static void prep(const tsar_acts *s, int t) {
    const int8_t *a = s->act + s->act_stride * t;
    const int nq = quads(s->w);
    int8_t *d = (int8_t *)(s->prep + s->prep_stride * t);
    /* output byte o of the first 16 from in[5 (o % 4) + o / 4]: bytes 0-15 of a quad (lo) or 4-19 (hi) */
    const __m128i p1 = _mm_setr_epi8(0, 5, 10, 15, 1, 6, 11, -1, 2, 7, 12, -1, 3, 8, 13, -1);
    const __m128i p2 = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, 12, -1, -1, -1, 13, -1, -1, -1, 14);
    const __m128i p3 = _mm_setr_epi8(4, 9, 14, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m128i p4 = _mm_setr_epi8(-1, -1, -1, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    for (int q = 0; q < nq; q++) {
        const __m128i lo = _mm_loadu_si128((const __m128i *)(a + 20 * q));
        const __m128i hi = _mm_loadu_si128((const __m128i *)(a + 20 * q + 4));
        _mm_storeu_si128((__m128i *)(d + 20 * q), _mm_or_si128(_mm_shuffle_epi8(lo, p1), _mm_shuffle_epi8(hi, p2)));
        const int32_t top = _mm_cvtsi128_si32(_mm_or_si128(_mm_shuffle_epi8(lo, p3), _mm_shuffle_epi8(hi, p4)));
        __builtin_memcpy(d + 20 * q + 16, &top, 4);
    }
}

/* ---------------- AVX2 and AVX-VNNI ---------------- */

/* u = v + 121 for 32 code bytes: (b & 127) - 3 = |v|, signed by bit 7 (b is never 0). */
static inline __m256i codes_u(__m256i b) {
    const __m256i m = _mm256_sub_epi8(_mm256_and_si256(b, _mm256_set1_epi8(127)), _mm256_set1_epi8(3));
    return _mm256_add_epi8(_mm256_sign_epi8(m, b), _mm256_set1_epi8(121));
}

/* The int16 coefficients of n tokens, 20 per quad and token (c[20q + 4i + j]: digit i of group
 * 4q + j), from the digit-ordered activations of prep: c_0 = a_0, c_i = a_i - 3 a_{i-1}. */
static int16_t *coefficients(const tsar_acts *s, int nq) {
    size_t used = 0;
    int16_t *c = scratch_alloc(s, &used, coef_bytes(nq, s->n));
    for (int t = 0; t < s->n; t++) {
        const int8_t *d = (const int8_t *)(s->prep + s->prep_stride * t);
        int16_t *ct = c + (size_t)20 * nq * t;
        for (int q = 0; q < nq; q++) {
            const __m256i d03 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(d + 20 * q)));
            const __m256i d14 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(d + 20 * q + 4)));
            const __m256i c14 = _mm256_sub_epi16(d14, _mm256_add_epi16(d03, _mm256_add_epi16(d03, d03)));
            _mm_storel_epi64((__m128i *)(ct + 20 * q), _mm256_castsi256_si128(d03));
            _mm256_storeu_si256((__m256i *)(ct + 20 * q + 4), c14);
        }
    }
    return c;
}

static inline __m256i coef_bcast(const int16_t *c) {
    long long x;
    __builtin_memcpy(&x, c, 8);
    return _mm256_set1_epi64x(x);
}

/* The VEX vpdpwssd with its accumulator tied in place (gcc 12 copies the builtin's accumulator). */
AVXVNNI_TARGET static inline __attribute__((always_inline)) __m256i dpwssd_avx(__m256i acc, __m256i a, __m256i b) {
    __asm__("%{vex%} vpdpwssd %2, %1, %0" : "+x"(acc) : "x"(a), "xm"(b));
    return acc;
}

/* sum_i q_i c_i of one quad for 16 lanes (4 rows x 4 groups), added to acc; q_0 = u, q_{i+1} = q_i / 3
 * (q * 21846 >> 16, exact for q < 32768). Each quad's sum is its own chain; only acc is carried. */
static inline __attribute__((always_inline)) __m256i tele_avx2(__m256i q, const int16_t *c, __m256i acc) {
    const __m256i third = _mm256_set1_epi16(21846);
    __m256i s = _mm256_madd_epi16(q, coef_bcast(c));
    for (int i = 1; i < 5; i++) {
        q = _mm256_mulhi_epu16(q, third);
        s = _mm256_add_epi32(s, _mm256_madd_epi16(q, coef_bcast(c + 4 * i)));
    }
    return _mm256_add_epi32(acc, s);
}

AVXVNNI_TARGET static inline __attribute__((always_inline)) __m256i tele_avxvnni(__m256i q, const int16_t *c,
                                                                                __m256i acc) {
    const __m256i third = _mm256_set1_epi16(21846);
    __m256i s = _mm256_madd_epi16(q, coef_bcast(c));
    for (int i = 1; i < 5; i++) {
        q = _mm256_mulhi_epu16(q, third);
        s = dpwssd_avx(s, q, coef_bcast(c + 4 * i));
    }
    return _mm256_add_epi32(acc, s);
}

/* Store 8 rows: lo holds rows (0, 1 | 4, 5) as two int32 per row, hi (2, 3 | 6, 7). */
static inline void store8(int32_t *o, __m256i lo, __m256i hi, int32_t sum) {
    _mm256_storeu_si256((__m256i *)o, _mm256_sub_epi32(_mm256_hadd_epi32(lo, hi), _mm256_set1_epi32(sum)));
}

/* NS 32-byte slices of 8 rows from wb in each quad record of a block (NS = 4: the whole block,
 * NS = 2: one 16-row half), for token t and, with pair, t + 1 (NS * (1 + pair) <= 4: the int32
 * sums, two per slice and token, stay in registers). */
#ifndef T5_PF_AVX2
#define T5_PF_AVX2 1024      /* bytes ahead of the weight stream (from L3: +25 % measured here) */
#endif
#define T5_SLICES(NAME, TELE, TARGET)                                                              \
    TARGET static inline __attribute__((always_inline)) void NAME(                                 \
            const tsar_acts *s, int32_t *out, const uint8_t *wb, const int16_t *c0, int nq, int row,  \
            int t, const int NS, const int pair) {                                                 \
        const int16_t *c1 = c0 + 20 * nq;                                                          \
        const __m256i zero = _mm256_setzero_si256();                                               \
        __m256i acc[2][8];                                                                         \
        for (int u = 0; u < 2; u++)                                                                \
            for (int i = 0; i < 8; i++) acc[u][i] = zero;                                          \
        for (int q = 0; q < nq; q++) {                                                             \
            const uint8_t *p = wb + QUAD_BYTES * (size_t)q;                                        \
            _mm_prefetch((const char *)p + T5_PF_AVX2, _MM_HINT_T0);                               \
            if (NS == 4) _mm_prefetch((const char *)p + T5_PF_AVX2 + 64, _MM_HINT_T0);             \
            for (int sl = 0; sl < NS; sl++) {                                                      \
                const __m256i u = codes_u(_mm256_loadu_si256((const __m256i *)(p + 32 * sl)));     \
                const __m256i ul = _mm256_unpacklo_epi8(u, zero), uh = _mm256_unpackhi_epi8(u, zero); \
                acc[0][2 * sl] = TELE(ul, c0 + 20 * q, acc[0][2 * sl]);                            \
                acc[0][2 * sl + 1] = TELE(uh, c0 + 20 * q, acc[0][2 * sl + 1]);                    \
                if (pair) {                                                                        \
                    acc[1][2 * sl] = TELE(ul, c1 + 20 * q, acc[1][2 * sl]);                        \
                    acc[1][2 * sl + 1] = TELE(uh, c1 + 20 * q, acc[1][2 * sl + 1]);                \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
        for (int u = 0; u < 1 + pair; u++)                                                         \
            for (int sl = 0; sl < NS; sl++)                                                        \
                store8(out + (size_t)(t + u) * s->w->m + row + 8 * sl, acc[u][2 * sl], acc[u][2 * sl + 1], \
                       s->sums[t + u]);                                                            \
    }
T5_SLICES(slices_avx2, tele_avx2, )
T5_SLICES(slices_avxvnni, tele_avxvnni, AVXVNNI_TARGET)

/* Row chunks of ROW_CHUNK blocks (their weights stay in L2) x token pairs x blocks; a lone token
 * reads each block once, a pair in two 16-row halves. */
#define ROW_CHUNK 8
#define T5_ROWS(NAME, SLICES, TARGET)                                                              \
    TARGET static void NAME(const tsar_acts *s, int32_t *out, int m0, int m1) {                    \
        const int nq = quads(s->w);                                                                \
        int16_t *c = coefficients(s, nq);                                                          \
        for (int r0 = m0; r0 < m1; r0 += 32 * ROW_CHUNK) {                                         \
            const int r1 = r0 + 32 * ROW_CHUNK < m1 ? r0 + 32 * ROW_CHUNK : m1;                    \
            for (int t = 0; t < s->n; t += 2) {                                                    \
                const int16_t *ct = c + (size_t)20 * nq * t;                                       \
                for (int r = r0; r < r1; r += 32) {                                                \
                    const uint8_t *wb = s->w->w + (size_t)(r / 32) * nq * QUAD_BYTES;              \
                    if (t + 1 < s->n) {                                                            \
                        SLICES(s, out, wb, ct, nq, r, t, 2, 1);                                    \
                        SLICES(s, out, wb + 64, ct, nq, r + 16, t, 2, 1);                          \
                    } else {                                                                       \
                        SLICES(s, out, wb, ct, nq, r, t, 4, 0);                                    \
                    }                                                                              \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
        scratch_free(c);                                                                           \
    }
T5_ROWS(rows_avx2, slices_avx2, )
T5_ROWS(rows_avxvnni, slices_avxvnni, AVXVNNI_TARGET)

/* ---------------- AVX-512 VBMI ---------------- */

/* magnitude index -> t0..t3 in 2-bit fields: the low four balanced base-3 digits d of |v| = index - 3
 * as codes d + 1, i.e. the base-3 digits of (|v| + 40) mod 81; unused indices 0x55 (all codes 1:
 * zero). (sign, index / 4) -> t4: |v| >= 41 <=> index >= 44, i.e. index / 4 >= 11; mirrored for a
 * negative v. Constant tables: the simulator library runs no constructors. */
#define T5_DIGITS(x) ((x) % 3 | (x) / 3 % 3 << 2 | (x) / 9 % 3 << 4 | (x) / 27 % 3 << 6)
#define T5_FIELD(i) ((i) < 3 || (i) > 124 ? 0x55 : T5_DIGITS(((i) + 37) % 81))
#define T5_TOP(j) (((j) & 32) ? 1 - (((j) & 31) >= 11) : 1 + (((j) & 31) >= 11))
#define T5_X4(M, i) M(i), M(i + 1), M(i + 2), M(i + 3)
#define T5_X16(M, i) T5_X4(M, i), T5_X4(M, i + 4), T5_X4(M, i + 8), T5_X4(M, i + 12)
#define T5_X64(M, i) T5_X16(M, i), T5_X16(M, i + 16), T5_X16(M, i + 32), T5_X16(M, i + 48)
static const uint8_t FIELDS[128] __attribute__((aligned(64))) = {T5_X64(T5_FIELD, 0), T5_X64(T5_FIELD, 64)};
static const uint8_t TOP[64] __attribute__((aligned(64))) = {T5_X64(T5_TOP, 0)};

typedef struct { __m512i flo, fhi, top, aa, m03, m0c, m30, mc0; } dec_avx512_consts;

VBMI_TARGET static inline dec_avx512_consts dec_avx512_init(void) {
    dec_avx512_consts c;
    c.flo = _mm512_load_si512((const void *)FIELDS);
    c.fhi = _mm512_load_si512((const void *)(FIELDS + 64));
    c.top = _mm512_load_si512((const void *)TOP);
    c.aa = _mm512_set1_epi8((char)0xAA);
    c.m03 = _mm512_set1_epi8(0x03);
    c.m0c = _mm512_set1_epi8(0x0C);
    c.m30 = _mm512_set1_epi8(0x30);
    c.mc0 = _mm512_set1_epi8((char)0xC0);
    return c;
}

/* The four low codes of 64 code bytes in 2-bit fields (f), and their top codes. */
VBMI_TARGET static inline __attribute__((always_inline)) __m512i dec_avx512_fields(__m512i b, const dec_avx512_consts *c) {
    const __m512i f = _mm512_permutex2var_epi8(c->flo, b, c->fhi);
    return _mm512_mask_sub_epi8(f, _mm512_movepi8_mask(b), c->aa, f);
}

VBMI_TARGET static inline __attribute__((always_inline)) __m512i dec_avx512_top(__m512i b, const dec_avx512_consts *c) {
    return _mm512_permutexvar_epi8(_mm512_srli_epi16(b, 2), c->top);
}

/* Rows o[0..16) from the five sums of a tile: codes times 1, 4, 16, 64 and the top code. */
VBMI_TARGET static inline void finish_avx512(const __m512i *acc, int32_t *o, int32_t sum) {
    __m512i r = _mm512_add_epi32(acc[0], acc[4]);
    r = _mm512_add_epi32(r, _mm512_srai_epi32(acc[1], 2));
    r = _mm512_add_epi32(r, _mm512_srai_epi32(acc[2], 4));
    r = _mm512_add_epi32(r, _mm512_srai_epi32(acc[3], 6));
    _mm512_storeu_si512((void *)o, _mm512_sub_epi32(r, _mm512_set1_epi32(sum)));
}

/* Two or three tokens: one 32-row block, decoded once per tile for every token. acc[u][h][f]: token
 * u, tile h (rows 16h..16h+15), sums of codes times 1, 4, 16, 64 (f = 0..3) and of the top code. */
VBMI_TARGET static inline __attribute__((always_inline)) void gemv_block_avx512(
        const tsar_acts *s, int32_t *out, const uint8_t *wb, int nq, int row0, int t, const int NT) {
    const dec_avx512_consts c = dec_avx512_init();
    const int32_t *a[3];
    __m512i acc[3][2][5];
    for (int u = 0; u < NT; u++) {
        a[u] = (const int32_t *)(s->prep + s->prep_stride * (t + u));
        for (int h = 0; h < 2; h++)
            for (int f = 0; f < 5; f++) acc[u][h][f] = _mm512_setzero_si512();
    }
    for (int q = 0; q < nq; q++) {
        const uint8_t *p = wb + QUAD_BYTES * (size_t)q;
        for (int h = 0; h < 2; h++) {
            const __m512i b = _mm512_loadu_si512((const void *)(p + 64 * h));
            const __m512i f = dec_avx512_fields(b, &c), top = dec_avx512_top(b, &c);
            const __m512i f0 = _mm512_and_si512(f, c.m03), f1 = _mm512_and_si512(f, c.m0c);
            const __m512i f2 = _mm512_and_si512(f, c.m30), f3 = _mm512_and_si512(f, c.mc0);
            for (int u = 0; u < NT; u++) {
                const int32_t *x = a[u] + 5 * q;
                acc[u][h][0] = _mm512_dpbusd_epi32(acc[u][h][0], f0, _mm512_set1_epi32(x[0]));
                acc[u][h][1] = _mm512_dpbusd_epi32(acc[u][h][1], f1, _mm512_set1_epi32(x[1]));
                acc[u][h][2] = _mm512_dpbusd_epi32(acc[u][h][2], f2, _mm512_set1_epi32(x[2]));
                acc[u][h][3] = _mm512_dpbusd_epi32(acc[u][h][3], f3, _mm512_set1_epi32(x[3]));
                acc[u][h][4] = _mm512_dpbusd_epi32(acc[u][h][4], top, _mm512_set1_epi32(x[4]));
            }
        }
    }
    for (int u = 0; u < NT; u++)
        for (int h = 0; h < 2; h++)
            finish_avx512(acc[u][h], out + (size_t)(t + u) * s->w->m + row0 + 16 * h, s->sums[t + u]);
}

/* One token, in assembly (gcc 12 copies every vpdpbusd sum through another register once per
 * step). Two 32-row blocks from the two halves of the rows go together: their weights are two long
 * sequential streams, fetched from DRAM or L3 concurrently and prefetched T5_PF512 bytes ahead
 * (measured here, 6912 x 2560 from DRAM: one stream without software prefetch 5.8 GB/s, two
 * streams 8.0, two streams with prefetch 9.5-11.6). Registers: zmm0-15 the sums, four per tile
 * (codes times 1 with the top code, 4, 16, 64); zmm16-23 tables and masks; zmm24-28 the quad's
 * activation dwords; zmm29-31 temporaries. ADDR: the tile's 64 code bytes. */
#define T5_TILE(ADDR, S0, S1, S2, S3)                                                              \
    "vmovdqu64 " ADDR ", %%zmm29\n\t"                                                              \
    "vmovdqu64 " ADDR ", %%zmm30\n\t"                                                              \
    "vpmovb2m %%zmm29, %%k1\n\t"                                                                   \
    "vpermi2b %%zmm17, %%zmm16, %%zmm30\n\t"                                                       \
    "vpsrlw $2, %%zmm29, %%zmm29\n\t"                                                              \
    "vpermb %%zmm18, %%zmm29, %%zmm29\n\t"                                                         \
    "vpsubb %%zmm30, %%zmm19, %%zmm30%{%%k1%}\n\t"                                                 \
    "vpdpbusd %%zmm28, %%zmm29, %%zmm" #S0 "\n\t"                                                  \
    "vpandd %%zmm20, %%zmm30, %%zmm31\n\t"                                                         \
    "vpdpbusd %%zmm24, %%zmm31, %%zmm" #S0 "\n\t"                                                  \
    "vpandd %%zmm21, %%zmm30, %%zmm31\n\t"                                                         \
    "vpdpbusd %%zmm25, %%zmm31, %%zmm" #S1 "\n\t"                                                  \
    "vpandd %%zmm22, %%zmm30, %%zmm31\n\t"                                                         \
    "vpdpbusd %%zmm26, %%zmm31, %%zmm" #S2 "\n\t"                                                  \
    "vpandd %%zmm23, %%zmm30, %%zmm30\n\t"                                                         \
    "vpdpbusd %%zmm27, %%zmm30, %%zmm" #S3 "\n\t"
#define T5_STORE(R) "vmovdqa64 %%zmm" #R ", " #R "*64(%[res])\n\t"
#ifndef T5_PF512
#define T5_PF512 2048
#endif
#define T5_STR2(x) #x
#define T5_STR(x) T5_STR2(x)
#define T5_PF(ADDR) "prefetcht0 " T5_STR(T5_PF512) ADDR "\n\t"
#define T5_Z(R) "vpxord %%xmm" #R ", %%xmm" #R ", %%xmm" #R "\n\t"
#define T5_GEMV_ASM(ZERO, BODY, STORE)                                                             \
    __asm__ volatile(                                                                              \
        "vmovdqa64 (%[fields]), %%zmm16\n\t"                                                       \
        "vmovdqa64 64(%[fields]), %%zmm17\n\t"                                                     \
        "vmovdqa64 (%[top]), %%zmm18\n\t"                                                          \
        "vpbroadcastb %[aa], %%zmm19\n\t"                                                          \
        "vpbroadcastb %[m03], %%zmm20\n\t"                                                         \
        "vpbroadcastb %[m0c], %%zmm21\n\t"                                                         \
        "vpbroadcastb %[m30], %%zmm22\n\t"                                                         \
        "vpbroadcastb %[mc0], %%zmm23\n\t"                                                         \
        ZERO                                                                                       \
        "testq %[nq], %[nq]\n\t"                                                                   \
        "jz 2f\n\t"                                                                                \
        ".p2align 5\n"                                                                             \
        "1:\n\t"                                                                                   \
        "vpbroadcastd (%[a]), %%zmm24\n\t"                                                         \
        "vpbroadcastd 4(%[a]), %%zmm25\n\t"                                                        \
        "vpbroadcastd 8(%[a]), %%zmm26\n\t"                                                        \
        "vpbroadcastd 12(%[a]), %%zmm27\n\t"                                                       \
        "vpbroadcastd 16(%[a]), %%zmm28\n\t"                                                       \
        BODY                                                                                       \
        "subq $-128, %[w]\n\t"                                                                     \
        "addq $20, %[a]\n\t"                                                                       \
        "decq %[nq]\n\t"                                                                           \
        "jnz 1b\n"                                                                                 \
        "2:\n\t"                                                                                   \
        STORE                                                                                      \
        : [w] "+r"(w), [a] "+r"(a), [nq] "+r"(nq)                                                  \
        : [bs] "r"(bs), [fields] "r"(FIELDS), [top] "r"(TOP), [res] "r"(acc), [aa] "m"(aa),        \
          [m03] "m"(m03), [m0c] "m"(m0c), [m30] "m"(m30), [mc0] "m"(mc0)                            \
        : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",  \
          "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", \
          "xmm21", "xmm22", "xmm23", "xmm24", "xmm25", "xmm26", "xmm27", "xmm28", "xmm29", "xmm30", \
          "xmm31", "k1", "cc", "memory")

VBMI_TARGET static inline void finish4_avx512(const __m512i *acc, int32_t *o, int32_t sum) {
    __m512i r = _mm512_add_epi32(acc[0], _mm512_srai_epi32(acc[1], 2));
    r = _mm512_add_epi32(r, _mm512_srai_epi32(acc[2], 4));
    r = _mm512_add_epi32(r, _mm512_srai_epi32(acc[3], 6));
    _mm512_storeu_si512((void *)o, _mm512_sub_epi32(r, _mm512_set1_epi32(sum)));
}

/* One token, the 32-row block at wb (rows from row0) and, when nb is 2, the one bs bytes further
 * (rows from row1). */
VBMI_TARGET static void gemv1_blocks_avx512(const tsar_acts *s, int32_t *out, const uint8_t *wb, long nq, long bs,
                                        int row0, int row1, int nb) {
    __m512i acc[16];
    const uint8_t *w = wb;
    const int32_t *a = (const int32_t *)s->prep;
    const uint8_t aa = 0xAA, m03 = 0x03, m0c = 0x0C, m30 = 0x30, mc0 = 0xC0;
    if (nb == 2) {
        T5_GEMV_ASM(T5_Z(0) T5_Z(1) T5_Z(2) T5_Z(3) T5_Z(4) T5_Z(5) T5_Z(6) T5_Z(7) T5_Z(8) T5_Z(9)
                    T5_Z(10) T5_Z(11) T5_Z(12) T5_Z(13) T5_Z(14) T5_Z(15),
                    T5_PF("(%[w])") T5_PF("+64(%[w])") T5_PF("(%[w],%[bs])") T5_PF("+64(%[w],%[bs])")
                    T5_TILE("(%[w])", 0, 1, 2, 3) T5_TILE("64(%[w])", 4, 5, 6, 7)
                    T5_TILE("(%[w],%[bs])", 8, 9, 10, 11) T5_TILE("64(%[w],%[bs])", 12, 13, 14, 15),
                    T5_STORE(0) T5_STORE(1) T5_STORE(2) T5_STORE(3) T5_STORE(4) T5_STORE(5) T5_STORE(6)
                    T5_STORE(7) T5_STORE(8) T5_STORE(9) T5_STORE(10) T5_STORE(11) T5_STORE(12)
                    T5_STORE(13) T5_STORE(14) T5_STORE(15));
    } else {
        T5_GEMV_ASM(T5_Z(0) T5_Z(1) T5_Z(2) T5_Z(3) T5_Z(4) T5_Z(5) T5_Z(6) T5_Z(7),
                    T5_PF("(%[w])") T5_PF("+64(%[w])")
                    T5_TILE("(%[w])", 0, 1, 2, 3) T5_TILE("64(%[w])", 4, 5, 6, 7),
                    T5_STORE(0) T5_STORE(1) T5_STORE(2) T5_STORE(3) T5_STORE(4) T5_STORE(5) T5_STORE(6)
                    T5_STORE(7));
    }
    finish4_avx512(acc, out + row0, s->sums[0]);
    finish4_avx512(acc + 4, out + row0 + 16, s->sums[0]);
    if (nb == 2) {
        finish4_avx512(acc + 8, out + row1, s->sums[0]);
        finish4_avx512(acc + 12, out + row1 + 16, s->sums[0]);
    }
}

/* Decode a 32-row block into plain codes: dec[(5q + i) * 128 + 64h] holds code i of tile h. */
VBMI_TARGET static void decode_block_avx512(const uint8_t *wb, int nq, uint8_t *dec) {
    const dec_avx512_consts c = dec_avx512_init();
    for (int q = 0; q < nq; q++)
        for (int h = 0; h < 2; h++) {
            const __m512i b = _mm512_loadu_si512((const void *)(wb + QUAD_BYTES * (size_t)q + 64 * h));
            const __m512i f = dec_avx512_fields(b, &c);
            uint8_t *d = dec + (size_t)640 * q + 64 * h;
            _mm512_store_si512((void *)d, _mm512_and_si512(f, c.m03));
            _mm512_store_si512((void *)(d + 128), _mm512_and_si512(_mm512_srli_epi16(f, 2), c.m03));
            _mm512_store_si512((void *)(d + 256), _mm512_and_si512(_mm512_srli_epi16(f, 4), c.m03));
            _mm512_store_si512((void *)(d + 384), _mm512_and_si512(_mm512_srli_epi16(f, 6), c.m03));
            _mm512_store_si512((void *)(d + 512), dec_avx512_top(b, &c));
        }
}

/* The GEMM micro-kernel in assembly: 12 tokens (zmm0-11: tile 0, zmm12-23: tile 1), 8 (zmm0-7,
 * zmm12-19) or 4 (zmm0-3, zmm12-15) against decoded codes. Per step two code vectors and one broadcast activation
 * dword per token: 2 vpdpbusd per load. The sums are loaded from and stored back to acc (the steps
 * of a block go in chunks that keep their codes in L1). x: the token group's dwords, T per step. */
#define T5_G(U, V)                                                                                 \
    "vpbroadcastd " #U "*4(%[x]), %%zmm26\n\t"                                                     \
    "vpdpbusd %%zmm26, %%zmm24, %%zmm" #U "\n\t"                                                   \
    "vpdpbusd %%zmm26, %%zmm25, %%zmm" #V "\n\t"
#define T5_LOAD(R) "vmovdqa64 " #R "*64(%[res]), %%zmm" #R "\n\t"
#define T5_GEMM_ASM(LOAD, BODY, STORE, XS)                                                         \
    __asm__ volatile(                                                                              \
        LOAD                                                                                       \
        ".p2align 5\n"                                                                             \
        "1:\n\t"                                                                                   \
        "vmovdqa64 (%[d]), %%zmm24\n\t"                                                            \
        "vmovdqa64 64(%[d]), %%zmm25\n\t"                                                          \
        BODY                                                                                       \
        "subq $-128, %[d]\n\t"                                                                     \
        "addq $" #XS ", %[x]\n\t"                                                                  \
        "decq %[st]\n\t"                                                                           \
        "jnz 1b\n\t"                                                                               \
        STORE                                                                                      \
        : [d] "+r"(d), [x] "+r"(x), [st] "+r"(st)                                                  \
        : [res] "r"(acc)                                                                           \
        : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",  \
          "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", \
          "xmm21", "xmm22", "xmm23", "xmm24", "xmm25", "xmm26", "cc", "memory")
#define T5_ACC12(M) M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7) M(8) M(9) M(10) M(11) M(12) M(13) M(14) \
    M(15) M(16) M(17) M(18) M(19) M(20) M(21) M(22) M(23)
#define T5_ACC8(M) M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7) M(12) M(13) M(14) M(15) M(16) M(17) M(18) M(19)
#define T5_ACC4(M) M(0) M(1) M(2) M(3) M(12) M(13) M(14) M(15)

/* T (12, 8 or 4) tokens, st >= 1 steps of decoded codes from dec; acc[u] / acc[12 + u]: tiles 0 / 1. */
VBMI_TARGET static void gemm_tokens_avx512(const uint8_t *dec, const int32_t *x, long st, const int T, __m512i *acc) {
    const uint8_t *d = dec;
    if (T == 12)
        T5_GEMM_ASM(T5_ACC12(T5_LOAD),
                    T5_G(0, 12) T5_G(1, 13) T5_G(2, 14) T5_G(3, 15) T5_G(4, 16) T5_G(5, 17)
                    T5_G(6, 18) T5_G(7, 19) T5_G(8, 20) T5_G(9, 21) T5_G(10, 22) T5_G(11, 23),
                    T5_ACC12(T5_STORE), 48);
    else if (T == 8)
        T5_GEMM_ASM(T5_ACC8(T5_LOAD),
                    T5_G(0, 12) T5_G(1, 13) T5_G(2, 14) T5_G(3, 15) T5_G(4, 16) T5_G(5, 17)
                    T5_G(6, 18) T5_G(7, 19),
                    T5_ACC8(T5_STORE), 32);
    else
        T5_GEMM_ASM(T5_ACC4(T5_LOAD), T5_G(0, 12) T5_G(1, 13) T5_G(2, 14) T5_G(3, 15), T5_ACC4(T5_STORE), 16);
}

#define GEMM_CHUNK 160       /* steps (32 quads: 20 KiB of codes) per pass over the token groups */

/* Tokens in groups of 12, then one of 8 or 4 (the last one padded with zero activations); group
 * g's activations are stored step-major, T dwords a step, from its first token t0 times steps. */
VBMI_TARGET static void gemm_avx512(const tsar_acts *s, int32_t *out, int m0, int m1) {
    const int nq = quads(s->w), steps = 5 * nq, n = s->n, n4 = (n + 3) & ~3;
    const int ng12 = n4 / 12, ng = ng12 + (n4 > 12 * ng12), tail = n4 - 12 * ng12;
    size_t used = 0;
    uint8_t *dec = scratch_alloc(s, &used, dec_bytes(nq));
    int32_t *ail = scratch_alloc(s, &used, ail_bytes(nq, n4));
    __m512i *acc = scratch_alloc(s, &used, acc_bytes(ng));
    for (int g = 0; g < ng; g++) {
        const int t0 = 12 * g, T = g < ng12 ? 12 : tail;
        int32_t *x = ail + (size_t)steps * t0;
        for (int u = 0; u < T; u++) {
            const int32_t *a = (const int32_t *)(s->prep + s->prep_stride * (t0 + u < n ? t0 + u : 0));
            for (int st = 0; st < steps; st++) x[(size_t)st * T + u] = t0 + u < n ? a[st] : 0;
        }
    }
    for (int r = m0; r < m1; r += 32) {
        decode_block_avx512(s->w->w + (size_t)(r / 32) * nq * QUAD_BYTES, nq, dec);
        for (int i = 0; i < 24 * ng; i++) acc[i] = _mm512_setzero_si512();
        for (int c0 = 0; c0 < steps; c0 += GEMM_CHUNK) {
            const int cs = steps - c0 < GEMM_CHUNK ? steps - c0 : GEMM_CHUNK;
            for (int g = 0; g < ng; g++) {
                const int t0 = 12 * g, T = g < ng12 ? 12 : tail;
                gemm_tokens_avx512(dec + (size_t)128 * c0, ail + (size_t)steps * t0 + (size_t)c0 * T, cs, T,
                               acc + 24 * g);
            }
        }
        for (int g = 0; g < ng; g++) {
            const int t0 = 12 * g, T = g < ng12 ? 12 : tail;
            for (int u = 0; u < T && t0 + u < n; u++) {
                const __m512i sum = _mm512_set1_epi32(s->sums[t0 + u]);
                int32_t *o = out + (size_t)(t0 + u) * s->w->m + r;
                _mm512_storeu_si512((void *)o, _mm512_sub_epi32(acc[24 * g + u], sum));
                _mm512_storeu_si512((void *)(o + 16), _mm512_sub_epi32(acc[24 * g + 12 + u], sum));
            }
        }
    }
    scratch_free(acc);
    scratch_free(ail);
    scratch_free(dec);
}

VBMI_TARGET static void rows_avx512_vbmi(const tsar_acts *s, int32_t *out, int m0, int m1) {
    if (s->n >= GEMM_MIN_N) { gemm_avx512(s, out, m0, m1); return; }
    const int nq = quads(s->w);
    const long bs = (long)nq * QUAD_BYTES;
    const uint8_t *w0 = s->w->w + (size_t)(m0 / 32) * bs;
    const int nblk = (m1 - m0) / 32;
    if (s->n == 1) {
        /* Block i with block i + half: two long sequential streams. */
        const int half = nblk / 2;
        for (int i = 0; i < half; i++)
            gemv1_blocks_avx512(s, out, w0 + (size_t)i * bs, nq, bs * half, m0 + 32 * i, m0 + 32 * (i + half), 2);
        if (nblk & 1)
            gemv1_blocks_avx512(s, out, w0 + (size_t)(nblk - 1) * bs, nq, 0, m1 - 32, 0, 1);
        return;
    }
    for (int i = 0; i < nblk; i++) {
        if (s->n == 3) gemv_block_avx512(s, out, w0 + (size_t)i * bs, nq, m0 + 32 * i, 0, 3);
        else gemv_block_avx512(s, out, w0 + (size_t)i * bs, nq, m0 + 32 * i, 0, 2);
    }
}

#ifndef TSAR_SIM
/* The AVX-512 level (F/BW/VL/VNNI) does not imply VBMI (Skylake-SP and Cascade Lake lack it):
 * those CPUs run the AVX2 rows. */
static void rows_avx512(const tsar_acts *s, int32_t *out, int m0, int m1) {
    static int vbmi = -1;
    if (vbmi < 0) {
        __builtin_cpu_init();
        vbmi = __builtin_cpu_supports("avx512vbmi") ? 1 : 0;
    }
    if (vbmi) rows_avx512_vbmi(s, out, m0, m1);
    else rows_avx2(s, out, m0, m1);
}

const tsar_kernel tsar_kernel_trit5 = {
    .row_unit = 32, .prep_size = prep_size, .prep = prep,
    .rows = {[TSAR_ISA_AVX2] = rows_avx2, [TSAR_ISA_AVX512] = rows_avx512, [TSAR_ISA_AVXVNNI] = rows_avxvnni},
    .check = check};
#else
/* Simulator entries, with the signatures of common.h's TSAR_SIM_PREP_SUM (prepared activations and
 * the activation sums). work (64-byte aligned, tsar_sim_NAME_gemm_work_size() bytes; the GEMV's
 * tsar_sim_NAME_work_size() is that of one token): the n int32 sums rounded up to 64 bytes; where
 * k is not a multiple of 20, the tokens copied into zero-padded rows (prep reads whole quads of 20
 * columns, as from the native workspace's padded copy; otherwise it reads a in place); the n
 * prepared tokens, each rounded up to 64 bytes; the rows functions' scratch (scratch_alloc). The
 * AVX-512 entries run the VBMI rows (natively, an AVX-512 CPU without VBMI runs the AVX2 rows). */
static size_t sim_act_stride(const tsar_weights *w) {
    return w->k % 20 ? tsar_round_up((size_t)20 * quads(w), TSAR_ALIGN) : (size_t)w->k;
}

static size_t sim_work_size(int m, int k, int n) {
    const tsar_weights w = {0, 0, m, k, 0, 0};
    const int nq = quads(&w), n4 = (n + 3) & ~3, ng = (n4 + 11) / 12;
    const size_t coef = tsar_round_up(coef_bytes(nq, n), TSAR_ALIGN);
    const size_t gemm = tsar_round_up(dec_bytes(nq), TSAR_ALIGN) + tsar_round_up(ail_bytes(nq, n4), TSAR_ALIGN)
                        + tsar_round_up(acc_bytes(ng), TSAR_ALIGN);
    return tsar_token_sums_size(n) + (k % 20 ? sim_act_stride(&w) * n : 0)
           + tsar_round_up(prep_size(&w), TSAR_ALIGN) * n + (coef > gemm ? coef : gemm);
}

static inline __attribute__((always_inline)) int sim_run(
        void (*rows)(const tsar_acts *, int32_t *, int, int), const uint8_t *wp, int m, int k,
        const int8_t *a, int n, void *work, int32_t *out) {
    const tsar_weights w = {wp, 0, m, k, 0, 0};
    if (check(&w) || k < 1 || n < 1) return -1;
    uint8_t *p = tsar_token_sums(a, k, n, work);
    const int8_t *act = a;
    const size_t act_stride = sim_act_stride(&w);
    if (k % 20) {
        for (int t = 0; t < n; t++) {
            tsar_copy_bytes(p + act_stride * t, a + (size_t)k * t, (size_t)k);
            tsar_zero_bytes(p + act_stride * t + k, act_stride - (size_t)k);
        }
        act = (const int8_t *)p;
        p += act_stride * n;
    }
    const tsar_acts s = {&w, act, (int32_t *)work, p, act_stride, tsar_round_up(prep_size(&w), TSAR_ALIGN), n};
    for (int t = 0; t < n; t++) prep(&s, t);
    rows(&s, out, 0, m);
    return 0;
}

#define T5_SIM_ENTRIES(NAME, ROWS)                                                                 \
    unsigned long tsar_sim_##NAME##_work_size(int m, int k, int bm, int bk) {                      \
        (void)bm; (void)bk;                                                                        \
        return (unsigned long)sim_work_size(m, k, 1);                                              \
    }                                                                                              \
    int tsar_sim_##NAME##_gemv(const uint8_t *wp, int m, int k, const int8_t *a, void *work,       \
                               int32_t *out) {                                                     \
        return sim_run(ROWS, wp, m, k, a, 1, work, out);                                           \
    }                                                                                              \
    unsigned long tsar_sim_##NAME##_gemm_work_size(int m, int k, int bm, int bk, int n) {          \
        (void)bm; (void)bk;                                                                        \
        return (unsigned long)sim_work_size(m, k, n);                                              \
    }                                                                                              \
    int tsar_sim_##NAME##_gemm(const uint8_t *wp, int m, int k, const int8_t *a, int n,            \
                               void *work, int32_t *out) {                                         \
        return sim_run(ROWS, wp, m, k, a, n, work, out);                                           \
    }
T5_SIM_ENTRIES(trit5, rows_avx2)
T5_SIM_ENTRIES(trit5_avxvnni, rows_avxvnni)
T5_SIM_ENTRIES(trit5_avx512, rows_avx512_vbmi)
#endif
