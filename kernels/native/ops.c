/* The non-BitLinear operators of one decoded token (AVX2 + FMA + F16C), freestanding: no libc, no
 * libm, built into the simulator library (kernels/simbuild.py) so that their instruction mix and
 * traffic can be simulated and timed like the BitLinear cores. Exported with the library's default
 * visibility; everything else is static.
 *
 * Every entry returns 0 on success and -1 for a size it does not take (tsar_sim_op_argmax: the index,
 * or -1). Floats are float32, f16 values are passed as their uint16 bits (IEEE binary16, converted
 * with vcvtph2ps / vcvtps2ph, round to nearest even). Vector sizes must be positive multiples of 8
 * (one ymm of floats), rope's head dimension too (its halves of 8, then one of 4), the LM head's k a
 * multiple of 32 (four 8-lane accumulators). No input may hold a NaN. Loads and stores are unaligned.
 *
 * Every loop's trip count depends only on the sizes, and no branch on the data is taken anywhere
 * (maxima, argmax and clamps are vector selects), so the executed instructions of a call are a
 * function of its sizes alone: the counts grow affinely with the size that grows
 * (tsar.simulate.operators).
 *
 * exp (softmax, SiLU): x clamped to [-87.33654, 88], x = n ln2 + r with n = rint(x log2 e)
 * (vcvtps2dq: the MXCSR's round to nearest even) and ln2 split in two constants (Cody-Waite), exp(r)
 * = 1 + r + r^2 P(r) with P of degree 5 (the classic single-precision minimax coefficients of
 * Cephes' expf), times 2^n built in the exponent field (vpslld): at most 1.25 ulp from the exact
 * exp on a grid of 1.6 million points over the range.
 */
#include <stdint.h>
#include <immintrin.h>


static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline float hmax8(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* exp of 8 floats (see the header). */
static inline __m256 exp8(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.33654f)), _mm256_set1_ps(88.0f));
    const __m256i n = _mm256_cvtps_epi32(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)));
    const __m256 fn = _mm256_cvtepi32_ps(n);
    __m256 r = _mm256_fnmadd_ps(fn, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(fn, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

/* 8 f16 values at P + J as floats (vcvtph2ps from memory). */
#define F16(P, J) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((P) + (J))))

static inline int bad8(int n) { return n <= 0 || (n & 7) != 0; }

/* y[0..n) = table[row][0..n) as float32 (f16 rows of n). */
int tsar_sim_op_embed(const uint16_t *table, int row, float *y, int n) {
    if (bad8(n) || row < 0) return -1;
    const uint16_t *src = table + (long)row * n;
    for (int i = 0; i < n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    return 0;
}

/* Sum of squares of x[0..n): four 8-lane accumulators over 32, then 8 at a time. */
static inline float sum_squares(const float *x, int n) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);
        __m256 v2 = _mm256_loadu_ps(x + i + 16), v3 = _mm256_loadu_ps(x + i + 24);
        a0 = _mm256_fmadd_ps(v0, v0, a0);
        a1 = _mm256_fmadd_ps(v1, v1, a1);
        a2 = _mm256_fmadd_ps(v2, v2, a2);
        a3 = _mm256_fmadd_ps(v3, v3, a3);
    }
    for (; i < n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        a0 = _mm256_fmadd_ps(v, v, a0);
    }
    return hsum8(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
}

/* y = x / sqrt(mean(x^2) + eps) * w: the factor is 1 / sqrt(...) with vsqrtss and vdivss (exact
 * IEEE square root and division, no rsqrt approximation), then y = (x * factor) * w. */
int tsar_sim_op_rmsnorm(const float *x, const float *w, float *y, int n, float eps) {
    if (bad8(n)) return -1;
    const float ms = sum_squares(x, n) / (float)n + eps;
    const float inv = 1.0f / _mm_cvtss_f32(_mm_sqrt_ss(_mm_set_ss(ms)));
    const __m256 f = _mm256_set1_ps(inv);
    for (int i = 0; i < n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), f),
                                              _mm256_loadu_ps(w + i)));
    return 0;
}

/* Per-token absmax int8 quantization, float32 operations in the order of
 * tsar.kernels.quant.quantize_activations: amax = max(max|x|, 1e-5), inv = 127 / amax,
 * q = clip(rint(x * inv), -127, 127) (vcvtps2dq: round to nearest even), *scale = amax / 127. */
int tsar_sim_op_quantize(const float *x, int8_t *q, float *scale, int n) {
    if (bad8(n)) return -1;
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 m0 = _mm256_setzero_ps(), m1 = m0, m2 = m0, m3 = m0;
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        m0 = _mm256_max_ps(m0, _mm256_and_ps(absmask, _mm256_loadu_ps(x + i)));
        m1 = _mm256_max_ps(m1, _mm256_and_ps(absmask, _mm256_loadu_ps(x + i + 8)));
        m2 = _mm256_max_ps(m2, _mm256_and_ps(absmask, _mm256_loadu_ps(x + i + 16)));
        m3 = _mm256_max_ps(m3, _mm256_and_ps(absmask, _mm256_loadu_ps(x + i + 24)));
    }
    for (; i < n; i += 8) m0 = _mm256_max_ps(m0, _mm256_and_ps(absmask, _mm256_loadu_ps(x + i)));
    __m128 amax = _mm_set_ss(hmax8(_mm256_max_ps(_mm256_max_ps(m0, m1), _mm256_max_ps(m2, m3))));
    amax = _mm_max_ss(amax, _mm_set_ss(1e-5f));
    const float a = _mm_cvtss_f32(amax);
    const __m256 inv = _mm256_set1_ps(127.0f / a);
    const __m128i lo = _mm_set1_epi8(-127);
    for (i = 0; i < n; i += 8) {
        __m256i v = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i), inv));
        __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
        w = _mm_max_epi8(_mm_packs_epi16(w, w), lo);
        _mm_storel_epi64((__m128i *)(q + i), w);
    }
    *scale = a / 127.0f;
    return 0;
}

/* RoPE (NEOX pairs) in place on heads x hd floats: pair (i, i + hd/2) of each head rotated by
 * cos_t[i], sin_t[i]; hd a multiple of 8: halves of 8 floats at a time, then one of 4 where the half
 * is 4 more than a multiple of 8 (BitNet 3.8B's hd = 120). */
int tsar_sim_op_rope(float *x, const float *cos_t, const float *sin_t, int heads, int hd) {
    if (heads <= 0 || hd <= 0 || (hd & 7) != 0) return -1;
    const int half = hd / 2;
    for (int h = 0; h < heads; h++) {
        float *x1 = x + (long)h * hd, *x2 = x1 + half;
        int i = 0;
        for (; i + 8 <= half; i += 8) {
            const __m256 c = _mm256_loadu_ps(cos_t + i), s = _mm256_loadu_ps(sin_t + i);
            const __m256 a = _mm256_loadu_ps(x1 + i), b = _mm256_loadu_ps(x2 + i);
            _mm256_storeu_ps(x1 + i, _mm256_fmsub_ps(a, c, _mm256_mul_ps(b, s)));
            _mm256_storeu_ps(x2 + i, _mm256_fmadd_ps(a, s, _mm256_mul_ps(b, c)));
        }
        if (i < half) {
            const __m128 c = _mm_loadu_ps(cos_t + i), s = _mm_loadu_ps(sin_t + i);
            const __m128 a = _mm_loadu_ps(x1 + i), b = _mm_loadu_ps(x2 + i);
            _mm_storeu_ps(x1 + i, _mm_fmsub_ps(a, c, _mm_mul_ps(b, s)));
            _mm_storeu_ps(x2 + i, _mm_fmadd_ps(a, s, _mm_mul_ps(b, c)));
        }
    }
    return 0;
}

/* scores[0..4) = scale * dot(q, row r) for the four f16 rows k, k + stride, ... (hd % 8 == 0):
 * q loaded once for the four rows, two accumulators per row over 16 columns (eight independent
 * FMA chains), then 8; the four horizontal sums together (vhaddps) and one 4-float store. */
static inline void dot4_f16(const float *q, const uint16_t *k, long stride, int hd, __m128 scale,
                            float *scores) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, c0 = a0, c1 = a0, c2 = a0, c3 = a0;
    const uint16_t *k1 = k + stride, *k2 = k1 + stride, *k3 = k2 + stride;
    int j = 0;
    for (; j + 16 <= hd; j += 16) {
        const __m256 q0 = _mm256_loadu_ps(q + j), q1 = _mm256_loadu_ps(q + j + 8);
        a0 = _mm256_fmadd_ps(q0, F16(k, j), a0);
        c0 = _mm256_fmadd_ps(q1, F16(k, j + 8), c0);
        a1 = _mm256_fmadd_ps(q0, F16(k1, j), a1);
        c1 = _mm256_fmadd_ps(q1, F16(k1, j + 8), c1);
        a2 = _mm256_fmadd_ps(q0, F16(k2, j), a2);
        c2 = _mm256_fmadd_ps(q1, F16(k2, j + 8), c2);
        a3 = _mm256_fmadd_ps(q0, F16(k3, j), a3);
        c3 = _mm256_fmadd_ps(q1, F16(k3, j + 8), c3);
    }
    for (; j < hd; j += 8) {
        const __m256 q0 = _mm256_loadu_ps(q + j);
        a0 = _mm256_fmadd_ps(q0, F16(k, j), a0);
        a1 = _mm256_fmadd_ps(q0, F16(k1, j), a1);
        a2 = _mm256_fmadd_ps(q0, F16(k2, j), a2);
        a3 = _mm256_fmadd_ps(q0, F16(k3, j), a3);
    }
    const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(_mm256_add_ps(a0, c0), _mm256_add_ps(a1, c1)),
                                    _mm256_hadd_ps(_mm256_add_ps(a2, c2), _mm256_add_ps(a3, c3)));
    const __m128 sum = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    _mm_storeu_ps(scores, _mm_mul_ps(sum, scale));
}

/* One token's attention at position ctx - 1 over f16 caches laid out [ctx][kv_heads][hd]:
 * k_new, v_new (kv_heads x hd) are stored as f16 into row ctx - 1 first; then per query head h
 * (kv head h / (heads / kv_heads)): scores[t] = dot(q_h, K[t]) / sqrt(hd) (four rows at a time),
 * p = softmax(scores)
 * (max, exp, sum), out_h = (sum_t exp(s_t - max) V[t]) / sum (32 columns at a time, then 8). ctx % 8 == 0, hd % 8 == 0,
 * heads % kv_heads == 0; scores: ctx floats of scratch. */
int tsar_sim_op_attention(const float *q, const float *k_new, const float *v_new, uint16_t *kcache,
                          uint16_t *vcache, float *out, float *scores, int heads, int kv_heads, int hd,
                          int ctx) {
    if (heads <= 0 || kv_heads <= 0 || heads % kv_heads != 0 || bad8(hd) || bad8(ctx)) return -1;
    const long row = (long)kv_heads * hd;
    uint16_t *kdst = kcache + (long)(ctx - 1) * row, *vdst = vcache + (long)(ctx - 1) * row;
    for (long i = 0; i < row; i += 8) {
        _mm_storeu_si128((__m128i *)(kdst + i), _mm256_cvtps_ph(_mm256_loadu_ps(k_new + i), 0));
        _mm_storeu_si128((__m128i *)(vdst + i), _mm256_cvtps_ph(_mm256_loadu_ps(v_new + i), 0));
    }
    const int group = heads / kv_heads;
    const __m128 scale = _mm_set1_ps(1.0f / _mm_cvtss_f32(_mm_sqrt_ss(_mm_set_ss((float)hd))));
    for (int h = 0; h < heads; h++) {
        const float *qh = q + (long)h * hd;
        const uint16_t *kh = kcache + (long)(h / group) * hd, *vh = vcache + (long)(h / group) * hd;
        for (int t = 0; t < ctx; t += 4) dot4_f16(qh, kh + t * row, row, hd, scale, scores + t);
        __m256 mx = _mm256_set1_ps(-__builtin_inff());
        for (int t = 0; t < ctx; t += 8) mx = _mm256_max_ps(mx, _mm256_loadu_ps(scores + t));
        const __m256 vmax = _mm256_set1_ps(hmax8(mx));
        __m256 sum = _mm256_setzero_ps();
        for (int t = 0; t < ctx; t += 8) {
            const __m256 p = exp8(_mm256_sub_ps(_mm256_loadu_ps(scores + t), vmax));
            _mm256_storeu_ps(scores + t, p);
            sum = _mm256_add_ps(sum, p);
        }
        const __m256 inv = _mm256_set1_ps(1.0f / hsum8(sum));
        float *oh = out + (long)h * hd;
        int j = 0;
        for (; j + 32 <= hd; j += 32) {  /* 32 columns, even and odd t apart: eight accumulators */
            __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
            const uint16_t *v = vh + j;
            for (int t = 0; t < ctx; t += 2, v += 2 * row) {
                const __m256 p0 = _mm256_broadcast_ss(scores + t), p1 = _mm256_broadcast_ss(scores + t + 1);
                a0 = _mm256_fmadd_ps(p0, F16(v, 0), a0);
                a1 = _mm256_fmadd_ps(p0, F16(v, 8), a1);
                a2 = _mm256_fmadd_ps(p0, F16(v, 16), a2);
                a3 = _mm256_fmadd_ps(p0, F16(v, 24), a3);
                b0 = _mm256_fmadd_ps(p1, F16(v + row, 0), b0);
                b1 = _mm256_fmadd_ps(p1, F16(v + row, 8), b1);
                b2 = _mm256_fmadd_ps(p1, F16(v + row, 16), b2);
                b3 = _mm256_fmadd_ps(p1, F16(v + row, 24), b3);
            }
            _mm256_storeu_ps(oh + j, _mm256_mul_ps(_mm256_add_ps(a0, b0), inv));
            _mm256_storeu_ps(oh + j + 8, _mm256_mul_ps(_mm256_add_ps(a1, b1), inv));
            _mm256_storeu_ps(oh + j + 16, _mm256_mul_ps(_mm256_add_ps(a2, b2), inv));
            _mm256_storeu_ps(oh + j + 24, _mm256_mul_ps(_mm256_add_ps(a3, b3), inv));
        }
        for (; j < hd; j += 8) {  /* the last columns 8 at a time: four accumulators over t */
            __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
            const uint16_t *v = vh + j;
            for (int t = 0; t < ctx; t += 4, v += 4 * row) {
                a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(scores + t), F16(v, 0), a0);
                a1 = _mm256_fmadd_ps(_mm256_broadcast_ss(scores + t + 1), F16(v + row, 0), a1);
                a2 = _mm256_fmadd_ps(_mm256_broadcast_ss(scores + t + 2), F16(v + 2 * row, 0), a2);
                a3 = _mm256_fmadd_ps(_mm256_broadcast_ss(scores + t + 3), F16(v + 3 * row, 0), a3);
            }
            _mm256_storeu_ps(oh + j, _mm256_mul_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                                                   inv));
        }
    }
    return 0;
}

/* The FFN's gate activation times the up projection: kind 0: relu(g)^2 * u (BitNet b1.58's
 * squared ReLU), kind 1: silu(g) * u = g / (1 + exp(-g)) * u (LLaMA's SwiGLU). */
int tsar_sim_op_ffn_act(const float *g, const float *u, float *y, int n, int kind) {
    if (bad8(n) || (kind != 0 && kind != 1)) return -1;
    if (kind == 0) {
        const __m256 zero = _mm256_setzero_ps();
        for (int i = 0; i < n; i += 8) {
            const __m256 r = _mm256_max_ps(_mm256_loadu_ps(g + i), zero);
            _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(r, r), _mm256_loadu_ps(u + i)));
        }
    } else {
        const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
        for (int i = 0; i < n; i += 8) {
            const __m256 v = _mm256_loadu_ps(g + i);
            const __m256 d = _mm256_add_ps(one, exp8(_mm256_xor_ps(v, sign)));
            _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_div_ps(v, d), _mm256_loadu_ps(u + i)));
        }
    }
    return 0;
}

/* The LM head: y[r] = sum_j f16(w[r k + j]) x[j] for m rows of k (k % 32 == 0): four 8-lane
 * accumulators over 32 columns, one horizontal sum per row. */
int tsar_sim_op_f16_gemv(const uint16_t *w, const float *x, float *y, int m, int k) {
    if (m <= 0 || k <= 0 || (k & 31) != 0) return -1;
    for (int r = 0; r < m; r++) {
        const uint16_t *wr = w + (long)r * k;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int j = 0; j < k; j += 32) {
            a0 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(wr + j))),
                                 _mm256_loadu_ps(x + j), a0);
            a1 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(wr + j + 8))),
                                 _mm256_loadu_ps(x + j + 8), a1);
            a2 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(wr + j + 16))),
                                 _mm256_loadu_ps(x + j + 16), a2);
            a3 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(wr + j + 24))),
                                 _mm256_loadu_ps(x + j + 24), a3);
        }
        y[r] = hsum8(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    }
    return 0;
}

/* Keep, lane by lane, the (value, index) of b where it is greater, or equal with a smaller index. */
static inline void argmax_merge(__m256 *va, __m256i *ia, __m256 vb, __m256i ib) {
    const __m256 gt = _mm256_cmp_ps(vb, *va, _CMP_GT_OQ);
    const __m256 eq = _mm256_cmp_ps(vb, *va, _CMP_EQ_OQ);
    const __m256 lt = _mm256_castsi256_ps(_mm256_cmpgt_epi32(*ia, ib));
    const __m256 take = _mm256_or_ps(gt, _mm256_and_ps(eq, lt));
    *va = _mm256_blendv_ps(*va, vb, take);
    *ia = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(*ia), _mm256_castsi256_ps(ib), take));
}

/* Greedy sampling: the index of the first maximum of x[0..n) (n % 8 == 0, no NaN), or -1. Four
 * (value, iteration) vector pairs over 32 elements (strictly greater replaces: the first stays; the
 * iteration number, one shared counter, keeps the pairs in registers), then a (value, index) pair
 * 8 at a time, merged, and the smallest index among the lanes holding the maximum. */
int tsar_sim_op_argmax(const float *x, int n) {
    if (bad8(n)) return -1;
    const __m256 ninf = _mm256_set1_ps(-__builtin_inff());
    const __m256i one = _mm256_set1_epi32(1), lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256 v0 = ninf, v1 = ninf, v2 = ninf, v3 = ninf;
    __m256i it = _mm256_setzero_si256(), b0 = it, b1 = it, b2 = it, b3 = it;
    int i = 0;
#define ARGMAX_STEP(V, B, OFF)                                                                     \
    {                                                                                              \
        const __m256 xv = _mm256_loadu_ps(x + i + OFF);                                            \
        const __m256 g = _mm256_cmp_ps(xv, V, _CMP_GT_OQ);                                         \
        V = _mm256_max_ps(xv, V);                                                                  \
        B = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(B), _mm256_castsi256_ps(it), g)); \
    }
    for (; i + 32 <= n; i += 32) {
        ARGMAX_STEP(v0, b0, 0)
        ARGMAX_STEP(v1, b1, 8)
        ARGMAX_STEP(v2, b2, 16)
        ARGMAX_STEP(v3, b3, 24)
        it = _mm256_add_epi32(it, one);
    }
#undef ARGMAX_STEP
    /* iteration -> index: 32 iteration + 8 pair + lane */
    b0 = _mm256_add_epi32(_mm256_slli_epi32(b0, 5), lane);
    b1 = _mm256_add_epi32(_mm256_slli_epi32(b1, 5), _mm256_add_epi32(lane, _mm256_set1_epi32(8)));
    b2 = _mm256_add_epi32(_mm256_slli_epi32(b2, 5), _mm256_add_epi32(lane, _mm256_set1_epi32(16)));
    b3 = _mm256_add_epi32(_mm256_slli_epi32(b3, 5), _mm256_add_epi32(lane, _mm256_set1_epi32(24)));
    __m256 v4 = ninf;
    __m256i b4 = lane, i4 = _mm256_add_epi32(lane, _mm256_set1_epi32(i));
    for (; i < n; i += 8) {
        const __m256 xv = _mm256_loadu_ps(x + i);
        const __m256 g = _mm256_cmp_ps(xv, v4, _CMP_GT_OQ);
        v4 = _mm256_max_ps(xv, v4);
        b4 = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(b4), _mm256_castsi256_ps(i4), g));
        i4 = _mm256_add_epi32(i4, _mm256_set1_epi32(8));
    }
    argmax_merge(&v0, &b0, v1, b1);
    argmax_merge(&v2, &b2, v3, b3);
    argmax_merge(&v0, &b0, v2, b2);
    argmax_merge(&v0, &b0, v4, b4);
    /* the smallest index among the lanes equal to the maximum (others: INT32_MAX) */
    const __m256 at = _mm256_cmp_ps(v0, _mm256_set1_ps(hmax8(v0)), _CMP_EQ_OQ);
    const __m256i big = _mm256_set1_epi32(0x7fffffff);
    __m256i idx = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(big), _mm256_castsi256_ps(b0), at));
    __m128i m = _mm_min_epi32(_mm256_castsi256_si128(idx), _mm256_extracti128_si256(idx, 1));
    m = _mm_min_epi32(m, _mm_shuffle_epi32(m, 0x4e));
    m = _mm_min_epi32(m, _mm_shuffle_epi32(m, 0xb1));
    return _mm_cvtsi128_si32(m);
}
