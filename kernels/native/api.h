/* Public C API of tsar.kernels._native (parsed by cffi: plain declarations only). */
typedef struct {
    const uint8_t *w;      /* packed weights (format of the kernel)                  */
    const int32_t *aux;    /* dense: per-row weight sums; otherwise NULL             */
    int m, k;              /* logical output rows and input columns                  */
    int bm, bk;            /* TL1/TL2 row and column blocks; dense: int16 flush step */
} tsar_weights;

enum { TSAR_TL2 = 0, TSAR_TL1 = 1, TSAR_I2S = 2, TSAR_DENSE = 3, TSAR_INT2 = 4, TSAR_TRIT5 = 5,
       TSAR_TQ1_0 = 6, TSAR_TQ2_0 = 7, TSAR_IQ1_BN = 8, TSAR_IQ2_BN = 9, TSAR_NKERNELS = 10 };
enum { TSAR_ISA_AUTO = 0, TSAR_ISA_AVX2 = 1, TSAR_ISA_AVX512 = 2, TSAR_ISA_AVXVNNI = 3, TSAR_NISAS = 4 };

int tsar_cpu_isa(void);
int tsar_kernel_isa(int kernel, int isa);
size_t tsar_work_size(int kernel, const tsar_weights *w, int n);
int tsar_matmul_int(int kernel, int isa, const tsar_weights *w, const int8_t *a, int32_t *out,
                    int n, int threads, void *work);
int tsar_matmul_f32(int kernel, int isa, const tsar_weights *w, const float *x, float *y,
                    float w_scale, int n, int threads, void *work);
void tsar_quantize_rows(const float *x, int8_t *q, float *scales, int n, int k);
double tsar_stream_read(const void *buf, size_t bytes, int threads, int repeats);
double tsar_int8_peak(int isa, long iterations, int repeats);
int tsar_bench_f32(int kernel, int isa, const tsar_weights *const *copies, int ncopies, const float *x,
                   float *y, float w_scale, int n, int threads, void *work, int repeats, double *seconds);
