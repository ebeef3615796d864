/* Row driver shared by the row-major public ternary formats (TQ1_0, TQ2_0, IQ1_BN, IQ2_BN).
 *
 * A format splits each row into "steps"; decoding step s yields D vectors of 32 codes c = w + 1
 * (0, 1, 2) as unsigned bytes, and vector d pairs with 32 prepared activations of each token. The
 * result is sum(c * a) - sum(a). Prepared activations (per token, 64-byte aligned, zero where a code
 * slot holds no weight) put vector d of step s at byte
 *     64 D (s / 2) + 64 d + 32 (s % 2),
 * so that the AVX-512 variant reads steps 2i and 2i + 1 as one 64-byte vector.
 *
 * AVX2: vpmaddubsw (pair sums <= 2 * 2 * 127 = 508; 2 * 8 * 127 = 2032 for 2-bit codes kept times 4)
 * into int16 sums per token, widened into int32 with vpmaddwd every `flush` steps, chosen so that
 * `flush` times a step's bound is <= 32767 (2-bit: 16 * 4 * 508, or 8 * 2 * 2032 with codes times 4;
 * TQ1_0: 6 * 10 * 508; IQ1_BN: 12 * 5 * 508): nothing wraps.
 * AVX-VNNI and AVX-512 VNNI: vpdpbusd into int32, several independent chains per row.
 * GEMM: output rows in blocks of TR_ROW_BLOCK; inside a block, tokens in groups of up to four, and
 * for each group every row of the block: each decoded weight vector feeds the group's four
 * multiply-adds, the block's rows stay in L1/L2 while the token groups stream past. */
#ifndef TSAR_TERNARY_ROWS_H
#define TSAR_TERNARY_ROWS_H
#include "common.h"

#define TR_MAX_D 10
#define TR_TOKENS 4          /* tokens per decoded weight vector (the rows functions' largest group) */
#define TR_ROW_BLOCK 16
#define TR_UNROLL _Pragma("GCC unroll 16")

static inline size_t tr_act_offset(int D, int s, int d) {
    return (size_t)64 * D * (s >> 1) + 64 * d + 32 * (s & 1);
}

/* Bytes of prepared activations per token for `steps` steps of D vectors (whole step pairs). */
static inline size_t tr_prep_size(int D, int steps) { return (size_t)64 * D * ((steps + 1) / 2); }

/* Base-3 digits of bytes that store five trits as ceil(256 v / 243): multiplying the byte by 3^i
 * (mod 256) brings digit i (the most significant first) to the top, where it is
 * floor(3 x / 256) = [x >= 86] + [x >= 171]. We work on y = x ^ 0x80 (x - 128 as a signed byte):
 * 3y = 3x - 384 = 3x - 128 (mod 256), so y multiplies by 3 the same way and signed compares apply. */
/* Hide a constant from the optimizer (gcc rewrites y > c into min(y, c + 1) == c + 1, two µops). */
static inline __m256i tr_opaque(__m256i c) {
    __asm__("" : "+x"(c));
    return c;
}

static inline __m256i tr_trit(__m256i y) {
    const __m256i ge86 = _mm256_cmpgt_epi8(y, tr_opaque(_mm256_set1_epi8(-43)));
    const __m256i ge171 = _mm256_cmpgt_epi8(y, tr_opaque(_mm256_set1_epi8(42)));
    return _mm256_abs_epi8(_mm256_add_epi8(ge86, ge171));
}

static inline __m256i tr_times3(__m256i y) { return _mm256_add_epi8(y, _mm256_add_epi8(y, y)); }

/* Five digits of every byte of v, most significant first, into c[0..5). */
static inline __attribute__((always_inline)) void tr_digits5(__m256i v, __m256i *c) {
    __m256i y = _mm256_xor_si256(v, _mm256_set1_epi8((char)0x80));
    TR_UNROLL for (int i = 0; i < 5; i++) {
        c[i] = tr_trit(y);
        if (i < 4) y = tr_times3(y);
    }
}

/* The four 2-bit fields of every byte of v, field f (bits 2f, 2f + 1) into c[f]. Plain: (v >> 2f) & 3.
 * Scaled (one shift instead of three): v & 3, v & 0xC, (v >> 4) & 3, (v >> 4) & 0xC, so c[1] and
 * c[3] hold the codes times 4. */
static inline __attribute__((always_inline)) void tr_fields4(__m256i v, const int scaled, __m256i *c) {
    const __m256i m3 = _mm256_set1_epi8(0x03), mc = _mm256_set1_epi8(0x0c);
    if (scaled) {
        const __m256i h = _mm256_srli_epi16(v, 4);
        c[0] = _mm256_and_si256(v, m3);
        c[1] = _mm256_and_si256(v, mc);
        c[2] = _mm256_and_si256(h, m3);
        c[3] = _mm256_and_si256(h, mc);
    } else {
        c[0] = _mm256_and_si256(v, m3);
        c[1] = _mm256_and_si256(_mm256_srli_epi16(v, 2), m3);
        c[2] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m3);
        c[3] = _mm256_and_si256(_mm256_srli_epi16(v, 6), m3);
    }
}

/* Decode step s of a row into c[0..D); `scaled` asks a 2-bit format for tr_fields4's scaled codes. */
typedef void (*tr_decode_avx2)(const uint8_t *row, int s, int scaled, __m256i *c);

static inline __attribute__((always_inline)) __m256i tr_mad(__m256i c, const int8_t *a) {
    return _mm256_maddubs_epi16(c, _mm256_load_si256((const __m256i *)a));
}

/* Decode step s and add its products for T tokens (activations a[u] + off) to the int16 sums. */
static inline __attribute__((always_inline)) void tr_step_avx2(
        tr_decode_avx2 decode, const int D, const int scaled, const uint8_t *row, int s, size_t off,
        const int8_t *const *a, const int T, __m256i *part1, __m256i *part4) {
    __m256i c[TR_MAX_D];
    decode(row, s, scaled, c);
    TR_UNROLL for (int u = 0; u < T; u++) {
        const int8_t *au = a[u] + off;
        if (scaled) {
            part1[u] = _mm256_add_epi16(part1[u], _mm256_add_epi16(tr_mad(c[0], au), tr_mad(c[2], au + 128)));
            part4[u] = _mm256_add_epi16(part4[u], _mm256_add_epi16(tr_mad(c[1], au + 64), tr_mad(c[3], au + 192)));
        } else {
            TR_UNROLL for (int d = 0; d + 1 < D; d += 2)
                part1[u] = _mm256_add_epi16(part1[u], _mm256_add_epi16(tr_mad(c[d], au + 64 * d),
                                                                       tr_mad(c[d + 1], au + 64 * d + 64)));
            if (D & 1) part1[u] = _mm256_add_epi16(part1[u], tr_mad(c[D - 1], au + 64 * (D - 1)));
        }
    }
}

/* One row against T tokens (activations a[0..T)); res[u] = sum(c * a_u) over the row.
 * fields4: a 2-bit format (D = 4) whose decoder has the scaled mode; it is used for T <= 2, where
 * registers allow two int16 sums per token (codes times 1 and times 4, pair sums <= 2 * 8 * 127),
 * widened every flush_x4 steps; otherwise one int16 sum per token, widened every `flush` steps
 * (both even). Products are added in pairs, so that a step adds D / 2 terms to each loop-carried sum.
 * For a 2-bit format with one or two tokens the steps go in pairs (the prepared activations' unit:
 * simpler addressing), an odd last step on its own; otherwise one at a time (fewer live registers;
 * measured faster for more tokens and for the base-3 formats). */
static inline __attribute__((always_inline)) void tr_row_avx2(
        tr_decode_avx2 decode, const int D, const int fields4, const int flush, const int flush_x4,
        const uint8_t *row, int steps, const int8_t *const *a, const int T, int32_t *res) {
    const int scaled = fields4 && T <= 2, paired = scaled;
    const int every = scaled ? flush_x4 : flush, pairs = steps / 2;
    const __m256i one = _mm256_set1_epi16(1), four = _mm256_set1_epi16(4);
    __m256i acc[TR_TOKENS], part1[TR_TOKENS], part4[TR_TOKENS];
    TR_UNROLL for (int u = 0; u < T; u++) acc[u] = _mm256_setzero_si256();
    for (int s0 = 0; s0 < steps; s0 += every) {
        const int s1 = s0 + every < steps ? s0 + every : steps;
        TR_UNROLL for (int u = 0; u < T; u++) part1[u] = part4[u] = _mm256_setzero_si256();
        if (paired) {
            const int i1 = s1 / 2;
            for (int i = s0 / 2; i < i1; i++) {
                const size_t off = (size_t)64 * D * i;
                tr_step_avx2(decode, D, scaled, row, 2 * i, off, a, T, part1, part4);
                tr_step_avx2(decode, D, scaled, row, 2 * i + 1, off + 32, a, T, part1, part4);
            }
            if (s1 & 1)
                tr_step_avx2(decode, D, scaled, row, s1 - 1, (size_t)64 * D * pairs, a, T, part1, part4);
        } else {
            for (int s = s0; s < s1; s++)
                tr_step_avx2(decode, D, scaled, row, s, tr_act_offset(D, s, 0), a, T, part1, part4);
        }
        TR_UNROLL for (int u = 0; u < T; u++)
            acc[u] = scaled ? _mm256_add_epi32(acc[u], _mm256_add_epi32(_mm256_madd_epi16(part1[u], four),
                                                                        _mm256_madd_epi16(part4[u], one)))
                            : _mm256_add_epi32(acc[u], _mm256_madd_epi16(part1[u], one));
    }
    TR_UNROLL for (int u = 0; u < T; u++) res[u] = scaled ? tsar_hsum_epi32(acc[u]) >> 2 : tsar_hsum_epi32(acc[u]);
}

static inline __attribute__((always_inline)) void tr_rows_avx2(
        const tsar_acts *s, int32_t *out, int m0, int m1, tr_decode_avx2 decode, const int D,
        const int fields4, const int flush, const int flush_x4, size_t row_bytes, int steps) {
    const int n = s->n, m = s->w->m;
    for (int r0 = m0; r0 < m1; r0 += TR_ROW_BLOCK) {
        const int r1 = r0 + TR_ROW_BLOCK < m1 ? r0 + TR_ROW_BLOCK : m1;
        for (int t = 0; t < n; t += TR_TOKENS) {
            const int T = n - t < TR_TOKENS ? n - t : TR_TOKENS;
            const int8_t *a[TR_TOKENS];
            TR_UNROLL for (int u = 0; u < TR_TOKENS; u++)
                a[u] = (const int8_t *)(s->prep + s->prep_stride * (size_t)(t + (u < T ? u : 0)));
            for (int r = r0; r < r1; r++) {
                int32_t res[TR_TOKENS];
                const uint8_t *row = s->w->w + row_bytes * (size_t)r;
                if (T == 4) tr_row_avx2(decode, D, fields4, flush, flush_x4, row, steps, a, 4, res);
                else if (T == 3) tr_row_avx2(decode, D, fields4, flush, flush_x4, row, steps, a, 3, res);
                else if (T == 2) tr_row_avx2(decode, D, fields4, flush, flush_x4, row, steps, a, 2, res);
                else tr_row_avx2(decode, D, fields4, flush, flush_x4, row, steps, a, 1, res);
                for (int u = 0; u < T; u++) out[(size_t)(t + u) * m + r] = res[u] - s->sums[t + u];
            }
        }
    }
}

/* AVX-VNNI (VEX vpdpbusd ymm): the AVX2 driver's decoders, row blocks and token groups, with each
 * vpmaddubsw + vpaddw pair replaced by one vpdpbusd (codes unsigned, activations signed) into int32
 * (no widening windows). vpdpbusd's latency (~5 cycles, two issued a cycle) wants ~10 independent
 * chains, so each token spreads its products over tr_vnni_per(T, D) accumulators: product d of the
 * p-th step of a pair goes to chain (D p + d) mod per. Steps go in pairs (the prepared activations'
 * unit), an odd last step on its own. 2-bit formats always take the scaled decode (one shift, not
 * three): with D and per even a chain keeps one field parity, so the chains of the x4 codes
 * (odd ones) are summed apart and divided by 4 exactly. */
#define TR_VNNI_MAX_PER 8

/* Chains per token for a group of T tokens. 2-bit formats (D = 4, a cheap decode): 8, 8, 12 and 8
 * in all (even, for the scaled fields); four tokens keep two each, as 16 accumulators and the
 * codes exceed the 16 ymm registers (three each, on the unscaled decode, measured no faster). Base-3 formats (D = 10, 5): the decode (~6 operations a digit
 * vector) paces the loop and the D codes crowd the registers, so half as many (4, 4, 6, 8 in all)
 * measured fastest here (three a token for four tokens spills and was ~10 % slower). */
static inline int tr_vnni_per(int T, int D) {
    if (D == 4) return T == 1 ? 8 : T == 2 ? 4 : T == 3 ? 4 : 2;
    return T == 1 ? 4 : 2;
}

typedef __m256i tr_vnni_acc[TR_TOKENS][TR_VNNI_MAX_PER];

AVXVNNI_TARGET static inline __attribute__((always_inline)) void tr_step_avxvnni(
        tr_decode_avx2 decode, const int D, const int scaled, const uint8_t *row, int s, size_t off,
        const int8_t *const *a, const int T, const int per, const int p, tr_vnni_acc acc) {
    __m256i c[TR_MAX_D];
    decode(row, s, scaled, c);
    TR_UNROLL for (int d = 0; d < D; d++) {
        const int q = (D * p + d) % per;
        TR_UNROLL for (int u = 0; u < T; u++)
            acc[u][q] = tsar_dpbusd_avx(acc[u][q], c[d], _mm256_load_si256((const __m256i *)(a[u] + off + 64 * d)));
    }
}

/* One row against T tokens (activations a[0..T)); res[u] = sum(c * a_u) over the row. */
AVXVNNI_TARGET static inline __attribute__((always_inline)) void tr_row_avxvnni(
        tr_decode_avx2 decode, const int D, const int fields4, const uint8_t *row, int steps,
        const int8_t *const *a, const int T, int32_t *res) {
    const int per = tr_vnni_per(T, D), pairs = steps / 2;
    tr_vnni_acc acc;
    TR_UNROLL for (int u = 0; u < T; u++)
        TR_UNROLL for (int q = 0; q < per; q++) acc[u][q] = _mm256_setzero_si256();
    for (int i = 0; i < pairs; i++) {
        const size_t off = (size_t)64 * D * i;
        tr_step_avxvnni(decode, D, fields4, row, 2 * i, off, a, T, per, 0, acc);
        tr_step_avxvnni(decode, D, fields4, row, 2 * i + 1, off + 32, a, T, per, 1, acc);
    }
    if (steps & 1)
        tr_step_avxvnni(decode, D, fields4, row, steps - 1, (size_t)64 * D * pairs, a, T, per, 0, acc);
    TR_UNROLL for (int u = 0; u < T; u++) {
        if (fields4) {   /* even chains: codes, odd chains: codes times 4 */
            __m256i s1 = acc[u][0], s4 = acc[u][1];
            TR_UNROLL for (int q = 2; q < per; q += 2) {
                s1 = _mm256_add_epi32(s1, acc[u][q]);
                s4 = _mm256_add_epi32(s4, acc[u][q + 1]);
            }
            res[u] = tsar_hsum_epi32(s1) + (tsar_hsum_epi32(s4) >> 2);
        } else {
            __m256i sum = acc[u][0];
            TR_UNROLL for (int q = 1; q < per; q++) sum = _mm256_add_epi32(sum, acc[u][q]);
            res[u] = tsar_hsum_epi32(sum);
        }
    }
}

AVXVNNI_TARGET static inline __attribute__((always_inline)) void tr_rows_avxvnni(
        const tsar_acts *s, int32_t *out, int m0, int m1, tr_decode_avx2 decode, const int D,
        const int fields4, size_t row_bytes, int steps) {
    const int n = s->n, m = s->w->m;
    for (int r0 = m0; r0 < m1; r0 += TR_ROW_BLOCK) {
        const int r1 = r0 + TR_ROW_BLOCK < m1 ? r0 + TR_ROW_BLOCK : m1;
        for (int t = 0; t < n; t += TR_TOKENS) {
            const int T = n - t < TR_TOKENS ? n - t : TR_TOKENS;
            const int8_t *a[TR_TOKENS];
            TR_UNROLL for (int u = 0; u < TR_TOKENS; u++)
                a[u] = (const int8_t *)(s->prep + s->prep_stride * (size_t)(t + (u < T ? u : 0)));
            for (int r = r0; r < r1; r++) {
                int32_t res[TR_TOKENS];
                const uint8_t *row = s->w->w + row_bytes * (size_t)r;
                if (T == 4) tr_row_avxvnni(decode, D, fields4, row, steps, a, 4, res);
                else if (T == 3) tr_row_avxvnni(decode, D, fields4, row, steps, a, 3, res);
                else if (T == 2) tr_row_avxvnni(decode, D, fields4, row, steps, a, 2, res);
                else tr_row_avxvnni(decode, D, fields4, row, steps, a, 1, res);
                for (int u = 0; u < T; u++) out[(size_t)(t + u) * m + r] = res[u] - s->sums[t + u];
            }
        }
    }
}

#ifndef TSAR_SIM
AVX512_TARGET static inline __m512i tr_trit512(__m512i y) {
    const __mmask64 ge86 = _mm512_cmpgt_epi8_mask(y, _mm512_set1_epi8(-43));
    const __mmask64 ge171 = _mm512_cmpgt_epi8_mask(y, _mm512_set1_epi8(42));
    const __m512i one = _mm512_set1_epi8(1);
    const __m512i c = _mm512_maskz_mov_epi8(ge86, one);
    return _mm512_mask_add_epi8(c, ge171, c, one);
}

AVX512_TARGET static inline __attribute__((always_inline)) void tr_digits5_512(__m512i v, __m512i *c) {
    __m512i y = _mm512_xor_si512(v, _mm512_set1_epi8((char)0x80));
    TR_UNROLL for (int i = 0; i < 5; i++) {
        c[i] = tr_trit512(y);
        if (i < 4) y = _mm512_add_epi8(y, _mm512_add_epi8(y, y));
    }
}

AVX512_TARGET static inline __attribute__((always_inline)) void tr_fields4_512(__m512i v, __m512i *c) {
    const __m512i m3 = _mm512_set1_epi8(3);
    c[0] = _mm512_and_si512(v, m3);
    c[1] = _mm512_and_si512(_mm512_srli_epi16(v, 2), m3);
    c[2] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m3);
    c[3] = _mm512_and_si512(_mm512_srli_epi16(v, 6), m3);
}

/* Decode steps 2i and 2i + 1 into 64-byte vectors c[0..D); with `both` clear only step 2i exists
 * and the upper halves must be zero. */
typedef void (*tr_decode_avx512)(const uint8_t *row, int i, int both, __m512i *c);

AVX512_TARGET static inline __attribute__((always_inline)) void tr_row_avx512(
        tr_decode_avx512 decode, const int D, const uint8_t *row, int steps, const int8_t *const *a,
        const int T, int32_t *res) {
    enum { CHAINS = 4 };                      /* independent vpdpbusd chains per row: CHAINS / T a token */
    const int per = T >= CHAINS ? 1 : CHAINS / T;
    __m512i acc[TR_TOKENS][CHAINS];
    TR_UNROLL for (int u = 0; u < T; u++)
        TR_UNROLL for (int j = 0; j < per; j++) acc[u][j] = _mm512_setzero_si512();
    for (int i = 0; 2 * i < steps; i++) {
        __m512i c[TR_MAX_D];
        decode(row, i, 2 * i + 1 < steps, c);
        const size_t off = (size_t)64 * D * i;
        TR_UNROLL for (int d = 0; d < D; d++)
            TR_UNROLL for (int u = 0; u < T; u++)
                acc[u][d % per] = _mm512_dpbusd_epi32(acc[u][d % per], c[d],
                                                      _mm512_load_si512((const void *)(a[u] + off + 64 * d)));
    }
    TR_UNROLL for (int u = 0; u < T; u++) {
        TR_UNROLL for (int j = 1; j < per; j++) acc[u][0] = _mm512_add_epi32(acc[u][0], acc[u][j]);
        res[u] = _mm512_reduce_add_epi32(acc[u][0]);
    }
}

AVX512_TARGET static inline __attribute__((always_inline)) void tr_rows_avx512(
        const tsar_acts *s, int32_t *out, int m0, int m1, tr_decode_avx512 decode, const int D,
        size_t row_bytes, int steps) {
    const int n = s->n, m = s->w->m;
    for (int r0 = m0; r0 < m1; r0 += TR_ROW_BLOCK) {
        const int r1 = r0 + TR_ROW_BLOCK < m1 ? r0 + TR_ROW_BLOCK : m1;
        for (int t = 0; t < n; t += TR_TOKENS) {
            const int T = n - t < TR_TOKENS ? n - t : TR_TOKENS;
            const int8_t *a[TR_TOKENS];
            TR_UNROLL for (int u = 0; u < TR_TOKENS; u++)
                a[u] = (const int8_t *)(s->prep + s->prep_stride * (size_t)(t + (u < T ? u : 0)));
            for (int r = r0; r < r1; r++) {
                int32_t res[TR_TOKENS];
                const uint8_t *row = s->w->w + row_bytes * (size_t)r;
                if (T == 4) tr_row_avx512(decode, D, row, steps, a, 4, res);
                else if (T == 3) tr_row_avx512(decode, D, row, steps, a, 3, res);
                else if (T == 2) tr_row_avx512(decode, D, row, steps, a, 2, res);
                else tr_row_avx512(decode, D, row, steps, a, 1, res);
                for (int u = 0; u < T; u++) out[(size_t)(t + u) * m + r] = res[u] - s->sums[t + u];
            }
        }
    }
}

/* Two 32-byte loads as one 64-byte vector (the upper half zero unless `both`). */
AVX512_TARGET static inline __m512i tr_load2x256(const uint8_t *lo, const uint8_t *hi, int both) {
    const __m512i v = _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)lo));
    return both ? _mm512_inserti64x4(v, _mm256_loadu_si256((const __m256i *)hi), 1) : v;
}
#endif

#endif
