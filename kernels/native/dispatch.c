/* Kernel table, workspace layout, threading (pthreads, output rows split) and the public API. */
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include "common.h"

float tsar_quantize_token(const float *x, int8_t *act, int k, size_t act_stride);
void tsar_dequantize(const int32_t *acc, float *y, const float *scales, float w_scale,
                     int n, int m, int m0, int m1);

static const tsar_kernel *const KERNELS[TSAR_NKERNELS] = {
    &tsar_kernel_tl2, &tsar_kernel_tl1, &tsar_kernel_i2s, &tsar_kernel_dense,
    &tsar_kernel_int2, &tsar_kernel_trit5, &tsar_kernel_tq1_0, &tsar_kernel_tq2_0, &tsar_kernel_iq1_bn,
    &tsar_kernel_iq2_bn};

/* Whether this CPU executes the ISA level's instructions (AVX-512: F/BW/VL/VNNI; AVX-VNNI: the VEX
 * vpdpbusd beside AVX2). */
static int cpu_has(int isa) {
    __builtin_cpu_init();
    switch (isa) {
    case TSAR_ISA_AVX2: return __builtin_cpu_supports("avx2");
    case TSAR_ISA_AVX512:
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
    case TSAR_ISA_AVXVNNI: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("avxvnni");
    default: return 0;
    }
}

/* Levels in the order "auto" prefers them (AVX-VNNI and AVX-512 are not nested: Zen 4 has
 * AVX-512 without AVX-VNNI, Gracemont AVX-VNNI without AVX-512). */
static const int PREFERENCE[] = {TSAR_ISA_AVX512, TSAR_ISA_AVXVNNI, TSAR_ISA_AVX2};

int tsar_cpu_isa(void) {
    for (int i = 0; i < 3; i++)
        if (cpu_has(PREFERENCE[i])) return PREFERENCE[i];
    return 0;
}

int tsar_kernel_isa(int kernel, int isa) {
    if (kernel < 0 || kernel >= TSAR_NKERNELS || isa < 0 || isa >= TSAR_NISAS) return -1;
    if (isa == TSAR_ISA_AUTO) {
        for (int i = 0; i < 3; i++)
            if (cpu_has(PREFERENCE[i]) && KERNELS[kernel]->rows[PREFERENCE[i]]) return PREFERENCE[i];
        return -1;
    }
    return (cpu_has(isa) && KERNELS[kernel]->rows[isa]) ? isa : -1;
}

typedef struct {
    size_t act_stride, prep_stride, off_sums, off_scales, off_prep, off_acc, total;
} layout;

static layout make_layout(const tsar_kernel *kn, const tsar_weights *w, int n) {
    layout l;
    l.act_stride = tsar_round_up((size_t)w->k + 16, TSAR_ALIGN);
    l.prep_stride = tsar_round_up(kn->prep_size(w), TSAR_ALIGN);
    l.off_sums = l.act_stride * n;
    l.off_scales = l.off_sums + tsar_token_sums_size(n);
    l.off_prep = l.off_scales + tsar_round_up(sizeof(float) * n, TSAR_ALIGN);
    l.off_acc = l.off_prep + l.prep_stride * n;
    l.total = l.off_acc + tsar_round_up(sizeof(int32_t) * (size_t)n * w->m, TSAR_ALIGN);
    return l;
}

size_t tsar_work_size(int kernel, const tsar_weights *w, int n) {
    if (kernel < 0 || kernel >= TSAR_NKERNELS || n <= 0) return 0;
    return make_layout(KERNELS[kernel], w, n).total;
}

typedef struct {
    const tsar_kernel *kn;
    void (*rows)(const tsar_acts *, int32_t *, int, int);
    tsar_acts s;
    const int8_t *a;       /* integer input, or NULL */
    const float *x;        /* float input, or NULL   */
    int32_t *out;
    float *y, *scales, w_scale;
    int threads;
    volatile int arrived;           /* spinning barrier between preparation and rows */
} job;


/* Wait until *p >= target: spin briefly, then yield so that a waiting peer on the same vCPU runs
 * (on an oversubscribed machine a pure spin would hold the CPU for a whole scheduler slice). */
static void wait_at_least(volatile int *p, int target) {
    for (int spins = 0; __atomic_load_n(p, __ATOMIC_ACQUIRE) < target; spins++) {
        if (spins < 2000) _mm_pause();
        else sched_yield();
    }
}

static void barrier(job *j) {
    __atomic_add_fetch(&j->arrived, 1, __ATOMIC_ACQ_REL);
    wait_at_least(&j->arrived, j->threads);
}

static void token_prepare(job *j, int t) {
    const tsar_weights *w = j->s.w;
    int8_t *act = (int8_t *)j->s.act + j->s.act_stride * t;
    if (j->x) {
        j->scales[t] = tsar_quantize_token(j->x + (size_t)t * w->k, act, w->k, j->s.act_stride);
    } else {
        memcpy(act, j->a + (size_t)t * w->k, (size_t)w->k);
        memset(act + w->k, 0, j->s.act_stride - (size_t)w->k);
    }
    int32_t sum = 0;
    for (int i = 0; i < w->k; i++) sum += act[i];
    j->s.sums[t] = sum;
    j->kn->prep(&j->s, t);
}

static void run_part(job *j, int id) {
    const int T = j->threads, m = j->s.w->m;
    const int unit = j->kn->row_unit ? j->kn->row_unit : j->s.w->bm;
    for (int t = id; t < j->s.n; t += T) token_prepare(j, t);
    if (T > 1) barrier(j);
    const long units = (m + unit - 1) / unit;
    int m0 = (int)(units * id / T) * unit, m1 = (int)(units * (id + 1) / T) * unit;
    if (m1 > m) m1 = m;
    if (m0 < m1) {
        j->rows(&j->s, j->out, m0, m1);
        if (j->y) tsar_dequantize(j->out, j->y, j->scales, j->w_scale, j->s.n, m, m0, m1);
    }
}

/* Persistent worker pool: workers spin for a while after each job (low wake-up latency for
 * back-to-back calls), then sleep on a condition variable. One job runs at a time. */
#define SPIN_ROUNDS 4000   /* ~0.1 ms of pause loops */
static pthread_mutex_t pool_call = PTHREAD_MUTEX_INITIALIZER;   /* serializes jobs        */
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_cv = PTHREAD_COND_INITIALIZER;
static job *volatile pool_job;
static volatile unsigned pool_gen;
static volatile int pool_done;
static volatile int pool_threads;                              /* threads of the current job */
static int pool_size;                                          /* workers started (ids 1..) */

static void *worker(void *arg) {
    const int id = (int)(intptr_t)arg;
    unsigned seen = 0;
    for (;;) {
        int spins = 0;
        while (__atomic_load_n(&pool_gen, __ATOMIC_ACQUIRE) == seen && spins < SPIN_ROUNDS) {
            _mm_pause();
            spins++;
        }
        if (__atomic_load_n(&pool_gen, __ATOMIC_ACQUIRE) == seen) {
            pthread_mutex_lock(&pool_mu);
            while (pool_gen == seen) pthread_cond_wait(&pool_cv, &pool_mu);
            pthread_mutex_unlock(&pool_mu);
        }
        seen = __atomic_load_n(&pool_gen, __ATOMIC_ACQUIRE);
        /* Only participants touch the job: the caller waits for them, so it is still alive. */
        if (id < __atomic_load_n(&pool_threads, __ATOMIC_ACQUIRE)) {
            run_part(pool_job, id);
            __atomic_add_fetch(&pool_done, 1, __ATOMIC_ACQ_REL);
        }
    }
    return NULL;
}

static int run(job *j) {
    const int T = j->threads;
    if (T == 1) { run_part(j, 0); return 0; }
    pthread_mutex_lock(&pool_call);
    while (pool_size < T - 1) {
        pthread_t tid;
        if (pthread_create(&tid, NULL, worker, (void *)(intptr_t)(pool_size + 1))) break;
        pthread_detach(tid);
        pool_size++;
    }
    if (pool_size < T - 1) { pthread_mutex_unlock(&pool_call); return -6; }
    j->arrived = 0;
    pool_done = 0;
    pool_job = j;
    pool_threads = T;
    pthread_mutex_lock(&pool_mu);
    __atomic_add_fetch(&pool_gen, 1, __ATOMIC_ACQ_REL);
    pthread_cond_broadcast(&pool_cv);
    pthread_mutex_unlock(&pool_mu);
    run_part(j, 0);
    wait_at_least(&pool_done, T - 1);
    pthread_mutex_unlock(&pool_call);
    return 0;
}

static int setup(job *j, int kernel, int isa, const tsar_weights *w, int n, int threads, void *work) {
    if (kernel < 0 || kernel >= TSAR_NKERNELS) return -1;
    if (n <= 0 || threads <= 0 || threads > 64 || ((uintptr_t)work % TSAR_ALIGN)) return -2;
    const tsar_kernel *kn = KERNELS[kernel];
    if (kn->check(w)) return -3;
    const int chosen = tsar_kernel_isa(kernel, isa);
    if (chosen < 0) return -4;
    layout l = make_layout(kn, w, n);
    uint8_t *base = (uint8_t *)work;
    memset(j, 0, sizeof *j);
    j->kn = kn;
    j->rows = kn->rows[chosen];
    j->s = (tsar_acts){w, (const int8_t *)base, (int32_t *)(base + l.off_sums), base + l.off_prep,
                       l.act_stride, l.prep_stride, n};
    j->scales = (float *)(base + l.off_scales);
    j->out = (int32_t *)(base + l.off_acc);
    j->threads = threads;
    return 0;
}

int tsar_matmul_int(int kernel, int isa, const tsar_weights *w, const int8_t *a, int32_t *out,
                    int n, int threads, void *work) {
    job j;
    int rc = setup(&j, kernel, isa, w, n, threads, work);
    if (rc) return rc;
    j.a = a;
    j.out = out;
    return run(&j);
}

int tsar_matmul_f32(int kernel, int isa, const tsar_weights *w, const float *x, float *y,
                    float w_scale, int n, int threads, void *work) {
    job j;
    int rc = setup(&j, kernel, isa, w, n, threads, work);
    if (rc) return rc;
    j.x = x;
    j.y = y;
    j.w_scale = w_scale;
    return run(&j);
}

#include <time.h>
static double mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Time 'repeats' float products, rotating through 'ncopies' weight copies (same shape): seconds[i]
 * is the wall time of call i. Weight copies larger than the caches make every call stream from DRAM. */
int tsar_bench_f32(int kernel, int isa, const tsar_weights *const *copies, int ncopies, const float *x,
                   float *y, float w_scale, int n, int threads, void *work, int repeats, double *seconds) {
    for (int i = 0; i < repeats; i++) {
        const double t0 = mono();
        const int rc = tsar_matmul_f32(kernel, isa, copies[i % ncopies], x, y, w_scale, n, threads, work);
        seconds[i] = mono() - t0;
        if (rc) return rc;
    }
    return 0;
}
