// cublas_gemm_bench.c: cuBLAS on the shapes of kernels/cuda's BenchmarkMatMulT,
// and the GPU's memory bandwidth, for a GPU machine without PyTorch.
//
// scripts/torch_gemm_bench.py needs PyTorch; this program needs only the
// driver (libcuda.so.1) and a cuBLAS library somewhere on the machine, which
// it loads at run time with dlopen: the name in $CUBLAS_LIB if set, else
// libcublas.so.12, then .so.11. It prints, one line each:
//
//   hbm        the HBM peak from the device's memory clock and bus width
//              (2 transfers a clock), and a device-to-device copy's rate
//              (bytes read + bytes written per second) as the attainable one;
//   gemm       cuBLAS's rate on dst = x·wᵀ (x n×in, w out×in, row-major),
//              Llama-3.2-1B's shapes, n = 1, 16, 512, 2048, in three modes:
//              fp32 (f32 in and out, no tensor cores), tf32 (f32 in and out,
//              tensor cores with TF32 inputs) and bf16 (bf16 in and out,
//              tensor cores, f32 accumulation). Names match the Go
//              sub-benchmarks; TFLOP/s = 2·n·in·out / median time of 20.
//
// Build (scripts/gpu-check.sh --build does it):
//   cc -O2 -o bin/cublas-gemm-bench scripts/cublas_gemm_bench.c -lcuda -ldl
// It needs cuda.h and cublas_v2.h (make cuda-deps) only for their types.
#include <cuda.h>
#include <cublas_v2.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef cublasStatus_t (*create_fn)(cublasHandle_t *);
typedef cublasStatus_t (*mathmode_fn)(cublasHandle_t, cublasMath_t);
typedef cublasStatus_t (*gemmex_fn)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                    const void *, const void *, cudaDataType, int, const void *, cudaDataType,
                                    int, const void *, void *, cudaDataType, int, cublasComputeType_t,
                                    cublasGemmAlgo_t);

static void check(CUresult r, const char *what) {
	if (r != CUDA_SUCCESS) {
		const char *name = "?";
		cuGetErrorName(r, &name);
		fprintf(stderr, "cublas-gemm-bench: %s: %s\n", what, name);
		exit(1);
	}
}

static int cmp(const void *a, const void *b) {
	float x = *(const float *)a, y = *(const float *)b;
	return (x > y) - (x < y);
}

// median_ms times fn 20 times with events on the default stream, after 3
// warm-up calls (cuBLAS picks its algorithm on the first).
#define ITERS 20
static float median_ms(void (*fn)(void *), void *arg) {
	CUevent a, b;
	float t[ITERS];
	check(cuEventCreate(&a, CU_EVENT_DEFAULT), "cuEventCreate");
	check(cuEventCreate(&b, CU_EVENT_DEFAULT), "cuEventCreate");
	for (int i = 0; i < 3; i++) fn(arg);
	check(cuCtxSynchronize(), "warm-up");
	for (int i = 0; i < ITERS; i++) {
		check(cuEventRecord(a, 0), "cuEventRecord");
		fn(arg);
		check(cuEventRecord(b, 0), "cuEventRecord");
		check(cuEventSynchronize(b), "cuEventSynchronize");
		check(cuEventElapsedTime(&t[i], a, b), "cuEventElapsedTime");
	}
	cuEventDestroy(a);
	cuEventDestroy(b);
	qsort(t, ITERS, sizeof t[0], cmp);
	return t[ITERS / 2];
}

struct copy_arg {
	CUdeviceptr dst, src;
	size_t bytes;
};
static void do_copy(void *p) {
	struct copy_arg *c = p;
	check(cuMemcpyDtoDAsync(c->dst, c->src, c->bytes, 0), "cuMemcpyDtoDAsync");
}

struct gemm_arg {
	gemmex_fn gemm;
	cublasHandle_t h;
	int n, in, out;
	cudaDataType type;
	cublasComputeType_t compute;
	CUdeviceptr x, w, dst;
};
static void do_gemm(void *p) {
	struct gemm_arg *g = p;
	float one = 1, zero = 0;
	// Row-major dst (n×out) = x (n×in) · wᵀ is column-major dstᵀ (out×n) =
	// op(w) · x with w read transposed: m = out, n = n, k = in.
	cublasStatus_t s = g->gemm(g->h, CUBLAS_OP_T, CUBLAS_OP_N, g->out, g->n, g->in, &one, (void *)g->w, g->type,
	                           g->in, (void *)g->x, g->type, g->in, &zero, (void *)g->dst, g->type, g->out,
	                           g->compute, CUBLAS_GEMM_DEFAULT);
	if (s != CUBLAS_STATUS_SUCCESS) {
		fprintf(stderr, "cublas-gemm-bench: cublasGemmEx: status %d\n", (int)s);
		exit(1);
	}
}

int main(void) {
	const char *names[] = {getenv("CUBLAS_LIB"), "libcublas.so.12", "libcublas.so.11", "libcublas.so"};
	void *lib = NULL;
	const char *found = NULL;
	for (size_t i = 0; i < sizeof names / sizeof names[0] && !lib; i++) {
		if (names[i] && (lib = dlopen(names[i], RTLD_NOW | RTLD_GLOBAL))) found = names[i];
	}
	check(cuInit(0), "cuInit");
	CUdevice dev;
	CUcontext ctx;
	check(cuDeviceGet(&dev, 0), "cuDeviceGet");
	check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
	check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");

	char name[256];
	int clock_khz, bus_bits;
	check(cuDeviceGetName(name, sizeof name, dev), "cuDeviceGetName");
	check(cuDeviceGetAttribute(&clock_khz, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, dev), "memory clock");
	check(cuDeviceGetAttribute(&bus_bits, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, dev), "bus width");
	double peak = 2.0 * clock_khz * 1e3 * bus_bits / 8 / 1e9;
	struct copy_arg c = {.bytes = (size_t)1 << 30};
	check(cuMemAlloc(&c.src, c.bytes), "cuMemAlloc");
	check(cuMemAlloc(&c.dst, c.bytes), "cuMemAlloc");
	check(cuMemsetD8(c.src, 1, c.bytes), "cuMemsetD8");
	float ms = median_ms(do_copy, &c);
	double copy = 2.0 * c.bytes / (ms / 1e3) / 1e9;
	printf("hbm %s: memory clock %d MHz, bus %d bits: peak %.0f GB/s; device-to-device copy of 1 GiB %.0f GB/s (%.0f%% of peak)\n",
	       name, clock_khz / 1000, bus_bits, peak, copy, 100 * copy / peak);
	cuMemFree(c.src);
	cuMemFree(c.dst);

	if (!lib) {
		printf("gemm skipped: no cuBLAS library found (%s); set CUBLAS_LIB to its path\n", dlerror());
		return 0;
	}
	create_fn create = (create_fn)dlsym(lib, "cublasCreate_v2");
	mathmode_fn mathmode = (mathmode_fn)dlsym(lib, "cublasSetMathMode");
	struct gemm_arg g = {.gemm = (gemmex_fn)dlsym(lib, "cublasGemmEx")};
	if (!create || !mathmode || !g.gemm) {
		fprintf(stderr, "cublas-gemm-bench: %s lacks cublasCreate_v2, cublasSetMathMode or cublasGemmEx\n", found);
		return 1;
	}
	if (create(&g.h) != CUBLAS_STATUS_SUCCESS) {
		fprintf(stderr, "cublas-gemm-bench: cublasCreate failed\n");
		return 1;
	}
	printf("gemm cuBLAS from %s\n", found);

	const struct {
		const char *name;
		int in, out;
	} shapes[] = {{"qo_proj", 2048, 2048}, {"gate_up_proj", 2048, 8192}, {"down_proj", 8192, 2048},
	              {"lm_head", 2048, 128256}};
	const int batches[] = {1, 16, 512, 2048};
	const struct {
		const char *name;
		cudaDataType type;
		cublasComputeType_t compute;
		cublasMath_t math;
		int bytes;
	} modes[] = {{"fp32", CUDA_R_32F, CUBLAS_COMPUTE_32F_PEDANTIC, CUBLAS_PEDANTIC_MATH, 4},
	             {"tf32", CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_TF32_TENSOR_OP_MATH, 4},
	             {"bf16", CUDA_R_16BF, CUBLAS_COMPUTE_32F, CUBLAS_DEFAULT_MATH, 2}};
	size_t most = (size_t)2048 * 128256 * 4; // the largest x, w or dst in bytes
	check(cuMemAlloc(&g.x, (size_t)2048 * 8192 * 4), "cuMemAlloc");
	check(cuMemAlloc(&g.w, most), "cuMemAlloc");
	check(cuMemAlloc(&g.dst, most), "cuMemAlloc");
	// Small values, so that neither f32 nor bf16 overflows: 0x3c00 3c00 is
	// 0.0078 as bf16 and about 0.0078 as f32.
	check(cuMemsetD32(g.x, 0x3c003c00, (size_t)2048 * 8192), "cuMemsetD32");
	check(cuMemsetD32(g.w, 0x3c003c00, most / 4), "cuMemsetD32");
	for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
		mathmode(g.h, modes[m].math);
		g.compute = modes[m].compute;
		g.type = modes[m].type;
		for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
			for (size_t b = 0; b < sizeof batches / sizeof batches[0]; b++) {
				g.n = batches[b], g.in = shapes[s].in, g.out = shapes[s].out;
				float t = median_ms(do_gemm, &g);
				double flops = 2.0 * g.n * g.in * g.out;
				printf("gemm %s %s/in=%d/out=%d/n=%d %.3f ms %.1f TFLOP/s %.0f weightGB/s\n", modes[m].name,
				       shapes[s].name, g.in, g.out, g.n, t, flops / (t / 1e3) / 1e12,
				       (double)g.in * g.out * modes[m].bytes / (t / 1e3) / 1e9);
			}
		}
	}
	return 0;
}
