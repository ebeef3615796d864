/*
 * AVX-512-intrinsics kernels for the gcc differential test (tests/sim/test_gcc_differential.py),
 * built only with the AVX-512 flag sets. Freestanding: nothing outside this file is called.
 * Tails are masked (no scalar loop), so every length exercises masked loads and stores; masked-off
 * bytes past a buffer's end are never accessed architecturally.
 * Functions using an extension that -march=icelake-server lacks (AVX-VNNI, AVX512-BF16) enable it
 * with a target attribute, so every flag set builds the whole file.
 */
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

static inline __mmask64 tail64(size_t left)
{
    return left >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << left) - 1);
}

static inline __mmask16 tail16(size_t left)
{
    return _cvtu32_mask16(left >= 16 ? 0xffffu : ((1u << left) - 1));
}

/* sum(a[i] * b[i]) for uint8 a and int8 b: vpdpbusd over 64 bytes, a zero-masked load tail. */
int32_t dot_vnni512(const uint8_t *a, const int8_t *b, size_t n)
{
    __m512i acc = _mm512_setzero_si512();
    for (size_t i = 0; i < n; i += 64) {
        __mmask64 m = tail64(n - i);
        acc = _mm512_dpbusd_epi32(acc, _mm512_maskz_loadu_epi8(m, a + i), _mm512_maskz_loadu_epi8(m, b + i));
    }
    return _mm512_reduce_add_epi32(acc);
}

/* The same with AVX-VNNI's 256-bit VEX form and a scalar tail. */
__attribute__((target("avxvnni")))
int32_t dot_avxvnni256(const uint8_t *a, const int8_t *b, size_t n)
{
    __m256i acc = _mm256_setzero_si256();
    size_t i = 0;
    for (; i + 32 <= n; i += 32)
        acc = _mm256_dpbusd_avx_epi32(acc, _mm256_loadu_si256((const __m256i *)(a + i)),
                                      _mm256_loadu_si256((const __m256i *)(b + i)));
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    int32_t sum = _mm_cvtsi128_si32(s);
    for (; i < n; ++i)
        sum += (int32_t)a[i] * (int32_t)b[i];
    return sum;
}

/* LUT lookups as a LUT-based ternary kernel does them: out[i] = lut[idx[i] & 127] (vpermi2b over
 * the 128-entry table) + lut[(idx[i] >> 1) & 63] (vpermb, its index taken from a 16-bit shift,
 * whose stray bit 7 vpermb ignores), wrapping int8 adds. */
void lut_vbmi(const uint8_t *idx, const int8_t *lut, int8_t *out, size_t n)
{
    const __m512i lo = _mm512_loadu_si512(lut), hi = _mm512_loadu_si512(lut + 64);
    for (size_t i = 0; i < n; i += 64) {
        __mmask64 m = tail64(n - i);
        __m512i iv = _mm512_maskz_loadu_epi8(m, idx + i);
        __m512i wide = _mm512_permutex2var_epi8(lo, iv, hi);
        __m512i narrow = _mm512_permutexvar_epi8(_mm512_srli_epi16(iv, 1), lo);
        _mm512_mask_storeu_epi8(out + i, m, _mm512_add_epi8(wide, narrow));
    }
}

/* The 16 int32 at p (lanes of mask m) += the 16 int8 of x, sign-extended. */
static inline void add16(int32_t *p, __mmask16 m, __m128i x)
{
    __m512i yv = _mm512_maskz_loadu_epi32(m, p);
    _mm512_mask_storeu_epi32(p, m, _mm512_add_epi32(yv, _mm512_cvtepi8_epi32(x)));
}

/* y[i] += x[i] (int8 widened to int32): 64-byte masked loads of x, the mask split into four
 * 16-lane masks (kshiftrq) for the int32 masked loads and stores of y. */
void widen_add_masked(const int8_t *x, int32_t *y, size_t n)
{
    for (size_t i = 0; i < n; i += 64) {
        __mmask64 m = tail64(n - i);
        __m512i xv = _mm512_maskz_loadu_epi8(m, x + i);
        add16(y + i, (__mmask16)_cvtmask64_u64(m), _mm512_extracti32x4_epi32(xv, 0));
        add16(y + i + 16, (__mmask16)_cvtmask64_u64(_kshiftri_mask64(m, 16)), _mm512_extracti32x4_epi32(xv, 1));
        add16(y + i + 32, (__mmask16)_cvtmask64_u64(_kshiftri_mask64(m, 32)), _mm512_extracti32x4_epi32(xv, 2));
        add16(y + i + 48, (__mmask16)_cvtmask64_u64(_kshiftri_mask64(m, 48)), _mm512_extracti32x4_epi32(xv, 3));
    }
}

/* Stream compaction of the x[i] > t: kept <- compress-store of them, dropped <- the others
 * (zero-masking compress, stored under a prefix mask), spread[i] <- x[i] where kept, else -1,
 * re-expanded from kept (expand-load). Returns how many were kept. */
int64_t compress_expand(const int32_t *x, int32_t *kept, int32_t *dropped, int32_t *spread, size_t n,
                        int32_t t)
{
    const __m512i thresh = _mm512_set1_epi32(t);
    size_t nk = 0, nd = 0;
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 m = tail16(n - i);
        __m512i v = _mm512_maskz_loadu_epi32(m, x + i);
        __mmask16 gt = _mm512_mask_cmpgt_epi32_mask(m, v, thresh);
        __mmask16 le = _kandn_mask16(gt, m);
        _mm512_mask_compressstoreu_epi32(kept + nk, gt, v);
        nk += (size_t)__builtin_popcount(_cvtmask16_u32(gt));
        unsigned c = (unsigned)__builtin_popcount(_cvtmask16_u32(le));
        _mm512_mask_storeu_epi32(dropped + nd, _cvtu32_mask16((1u << c) - 1), _mm512_maskz_compress_epi32(le, v));
        nd += c;
    }
    size_t pos = 0;
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 m = tail16(n - i);
        __m512i v = _mm512_maskz_loadu_epi32(m, x + i);
        __mmask16 gt = _mm512_mask_cmpgt_epi32_mask(m, v, thresh);
        __m512i e = _mm512_mask_expandloadu_epi32(_mm512_set1_epi32(-1), gt, kept + pos);
        pos += (size_t)__builtin_popcount(_cvtmask16_u32(gt));
        _mm512_mask_storeu_epi32(spread + i, m, e);
    }
    return (int64_t)nk;
}

/* r = maj(a, b, c) + rol(xor3(a, b, c), 7); out[i] = the bitwise select (r ? b : c) where a & b
 * has a bit set, else r: vpternlogd with immediates 0xe8, 0x96 and (merge-masked) 0xca. */
void ternlog_mix(const uint32_t *a, const uint32_t *b, const uint32_t *c, uint32_t *out, size_t n)
{
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 m = tail16(n - i);
        __m512i va = _mm512_maskz_loadu_epi32(m, a + i), vb = _mm512_maskz_loadu_epi32(m, b + i),
                vc = _mm512_maskz_loadu_epi32(m, c + i);
        __m512i maj = _mm512_ternarylogic_epi32(va, vb, vc, 0xe8);
        __m512i x3 = _mm512_ternarylogic_epi32(va, vb, vc, 0x96);
        __m512i r = _mm512_add_epi32(maj, _mm512_rol_epi32(x3, 7));
        __mmask16 sel = _mm512_mask_test_epi32_mask(m, va, vb);
        r = _mm512_mask_ternarylogic_epi32(r, sel, vb, vc, 0xca);
        _mm512_mask_storeu_epi32(out + i, m, r);
    }
}

/* out[i] = table[idx[i]] (vpgatherdd, a merge-masked gather on the tail), then the scatter
 * hist[idx[i]] = 1000 * i + out[i] for the odd out[i] (vpscatterdd; the indices collide: the
 * highest lane writes last). idx[i] < the table's and hist's length. */
void gather_scatter(const int32_t *table, const int32_t *idx, int32_t *out, int32_t *hist, size_t n)
{
    const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i one = _mm512_set1_epi32(1);
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 m = tail16(n - i);
        __m512i vi = _mm512_maskz_loadu_epi32(m, idx + i);
        __m512i g = n - i >= 16 ? _mm512_i32gather_epi32(vi, table, 4)
                                : _mm512_mask_i32gather_epi32(_mm512_set1_epi32(-7), m, vi, table, 4);
        _mm512_mask_storeu_epi32(out + i, m, g);
        __m512i pos = _mm512_add_epi32(lanes, _mm512_set1_epi32((int32_t)i));
        __m512i val = _mm512_add_epi32(_mm512_mullo_epi32(pos, _mm512_set1_epi32(1000)), g);
        _mm512_mask_i32scatter_epi32(hist, _mm512_mask_test_epi32_mask(m, g, one), vi, val, 4);
    }
}

/* BF16: pairs of float blocks rounded to bf16 (vcvtne2ps2bf16, stored to h) and accumulated with
 * vdpbf16ps into a float dot product of a and b; returns the sum of the 16 lanes. n counts
 * floats; the tail is zero-masked. */
__attribute__((target("avx512bf16")))
float dot_bf16(const float *a, const float *b, uint16_t *h, size_t n)
{
    __m512 acc = _mm512_setzero_ps();
    for (size_t i = 0; i < n; i += 32) {
        __mmask16 m0 = tail16(n - i), m1 = n - i > 16 ? tail16(n - i - 16) : 0;
        __m512bh ab = _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(m1, a + i + 16), _mm512_maskz_loadu_ps(m0, a + i));
        __m512bh bb = _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(m1, b + i + 16), _mm512_maskz_loadu_ps(m0, b + i));
        _mm512_mask_storeu_epi16(h + i, (__mmask32)_cvtmask64_u64(tail64(n - i)), (__m512i)ab);
        acc = _mm512_dpbf16_ps(acc, ab, bb);
    }
    return _mm512_reduce_add_ps(acc);
}

/* Opmask arithmetic on (a > b, a odd) per 16 lanes, folded into a hash: kandw, korw, kxorw,
 * kandnw, knotw, kshiftlw, kortestw (ZF and CF), kmovw. */
uint32_t kmask_ops(const int32_t *a, const int32_t *b, size_t n)
{
    uint32_t h = 0;
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 m = tail16(n - i);
        __m512i va = _mm512_maskz_loadu_epi32(m, a + i), vb = _mm512_maskz_loadu_epi32(m, b + i);
        __mmask16 gt = _mm512_mask_cmpgt_epi32_mask(m, va, vb);
        __mmask16 odd = _mm512_mask_test_epi32_mask(m, va, _mm512_set1_epi32(1));
        __mmask16 both = _kand_mask16(gt, odd), either = _kor_mask16(gt, odd);
        __mmask16 diff = _kxor_mask16(gt, odd), neither = _kandn_mask16(either, m);
        h = h * 31 + _cvtmask16_u32(both);
        h = h * 31 + _cvtmask16_u32(_kshiftli_mask16(diff, 3));
        h = h * 31 + (uint32_t)_mm512_kortestz(both, neither);
        h = h * 31 + (uint32_t)_kortestc_mask16_u8(either, neither);
        h = h * 31 + _cvtmask16_u32(_knot_mask16(_kor_mask16(neither, gt)));
    }
    return h;
}

/* Directed rounding without exceptions: sum[i] = a[i] + b[i] rounded toward -inf, prod[i] =
 * a[i] * b[i] toward +inf, q[i] = (int32)(a[i] * b[i]) rounded toward zero, all embedded
 * rounding (EVEX.b on register operands). */
void round_embedded(const float *a, const float *b, float *sum, float *prod, int32_t *q, size_t n)
{
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 m = tail16(n - i);
        __m512 va = _mm512_maskz_loadu_ps(m, a + i), vb = _mm512_maskz_loadu_ps(m, b + i);
        __m512 s = _mm512_add_round_ps(va, vb, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
        __m512 p = _mm512_mul_round_ps(va, vb, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC);
        __m512i t = _mm512_cvt_roundps_epi32(_mm512_mul_ps(va, vb), _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
        _mm512_mask_storeu_ps(sum + i, m, s);
        _mm512_mask_storeu_ps(prod + i, m, p);
        _mm512_mask_storeu_epi32(q + i, m, t);
    }
}

/* Bit statistics and transforms of bytes: returns the set bits of x (vpopcntq), out[i] =
 * bit-reversed x[i] (gf2p8affineqb with the reversal matrix) + popcount(x[i]) (vpopcntb,
 * BITALG), w[j] = funnel shift of x's dwords j and j+1 left by x's dword j (vpshldvd, VBMI2) for
 * the n / 4 whole dwords (dword j+1 is 0 past a 64-byte block, and past n). */
uint64_t bits_avx512(const uint8_t *x, uint8_t *out, uint32_t *w, size_t n)
{
    const __m512i reverse = _mm512_set1_epi64(0x8040201008040201LL);
    __m512i total = _mm512_setzero_si512();
    for (size_t i = 0; i < n; i += 64) {
        __mmask64 m = tail64(n - i);
        __m512i v = _mm512_maskz_loadu_epi8(m, x + i);
        total = _mm512_add_epi64(total, _mm512_popcnt_epi64(v));
        __m512i r = _mm512_add_epi8(_mm512_gf2p8affine_epi64_epi8(v, reverse, 0), _mm512_popcnt_epi8(v));
        _mm512_mask_storeu_epi8(out + i, m, r);
        __m512i next = _mm512_alignr_epi32(_mm512_setzero_si512(), v, 1);
        _mm512_mask_storeu_epi32(w + i / 4, tail16((n - i) / 4),
                                 _mm512_shldv_epi32(v, next, v));
    }
    return (uint64_t)_mm512_reduce_add_epi64(total);
}
