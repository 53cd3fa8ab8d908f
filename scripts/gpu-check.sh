#!/usr/bin/env bash
# gpu-check.sh: the whole hardware check of the CUDA backend in one run, for
# a GPU machine that has the NVIDIA driver (and perhaps PyTorch, ptxas,
# compute-sanitizer, ncu) but no Go toolchain.
#
#   scripts/gpu-check.sh --build     on the build machine (Debian 12, Go):
#                                    make cuda-deps, bin/cuda.test,
#                                    bin/phase08-cuda, bin/phase08-cuda.test,
#                                    bin/cublas-gemm-bench
#   scripts/gpu-check.sh             on the GPU machine, from the repository
#                                    root with bin/ beside it: every step
#                                    below, results under $OUT
#   scripts/gpu-check.sh --dry-run   here, without a GPU: builds the same
#                                    binaries for the CPU emulator (-tags
#                                    cudaemu) and runs the same steps with
#                                    them, smaller, so the script cannot rot
#
# Steps, each writing $OUT/<step>.txt (OUT defaults to out/gpu-check):
#   device     nvidia-smi, the backend's own description, ldd of the binary
#   ptxas      register and spill counts of every PTX file for sm_90, if
#              ptxas is installed
#   tests      every CUDA test with KVLAB_REQUIRE_GPU=1 (no device is a
#              failure, not a skip) and KVLAB_CUDA_SYNC=1 (a fault names
#              its kernel); on a failure, each failing test again under
#              compute-sanitizer memcheck, if installed
#   parity     the engine on the GPU against the engine on the CPU
#              (phase08's TestCUDAEngineParity): greedy tokens and logits,
#              without a prefix cache and with each of the three designs;
#              and with the KV pool in bf16 and f16 (TestCUDAKVCacheDType)
#   bench      the matmul and attention benchmarks, and the decode step's
#              host overhead with async and with pageable metadata uploads
#   cublas     scripts/cublas_gemm_bench.c: the HBM peak and a copy's rate,
#              and cuBLAS on the matmul benchmark's shapes, with whatever
#              libcublas the machine has
#   torch      scripts/torch_gemm_bench.py (cuBLAS on the same shapes), if
#              PyTorch sees the GPU
#   ncu        Nsight Compute on the decode-attention kernel, if installed
#   phase08    the phase-8 comparison on a small workload, -device cuda and
#              -device cpu (each checks that the caches reproduce the
#              baseline's tokens), then `make phase08`'s run (the built-in
#              model, prefix_caching at full size) with -device cuda, in
#              float32 and with -kv-cache-dtype bf16
# The run goes on after a failed step and exits non-zero at the end if any
# step failed; $OUT/summary.txt lists each step's outcome and time.
set -uo pipefail
cd "$(dirname "$0")/.."

mode=run
case "${1:-}" in
--build) mode=build ;;
--dry-run) mode=dry ;;
"") ;;
*)
	echo "usage: $0 [--build | --dry-run]" >&2
	exit 2
	;;
esac

BIN=${BIN:-bin}
if [ "$mode" = build ]; then
	set -e
	make cuda-deps
	mkdir -p "$BIN"
	# Stripped (-s -w): the binaries travel to the GPU machine.
	go test -c -tags cuda -ldflags='-s -w' -o "$BIN/cuda.test" ./kernels/cuda/
	go test -c -tags cuda -ldflags='-s -w' -o "$BIN/phase08-cuda.test" ./phase08
	go build -tags cuda -ldflags='-s -w' -o "$BIN/phase08-cuda" ./phase08
	cc -O2 -Wall -o "$BIN/cublas-gemm-bench" scripts/cublas_gemm_bench.c -lcuda -ldl
	echo "built $BIN/cuda.test, $BIN/phase08-cuda.test, $BIN/phase08-cuda and $BIN/cublas-gemm-bench; run scripts/gpu-check.sh on the GPU machine"
	exit 0
fi

OUT=${OUT:-out/gpu-check}
mkdir -p "$OUT"
rm -f "$OUT"/*.txt "$OUT"/*.json # a previous run's results
failed=0

# Sizes: the dry run keeps every step but shrinks its work, since the
# emulator runs a kernel about a million times slower than a GPU.
if [ "$mode" = dry ]; then
	set -e
	mkdir -p "$BIN"
	go test -c -tags cudaemu -o "$BIN/cuda-emu.test" ./kernels/cuda/
	go build -tags cudaemu -o "$BIN/phase08-emu" ./phase08
	go test -c -tags cudaemu -o "$BIN/phase08-emu.test" ./phase08
	set +e
	test_bin=$BIN/cuda-emu.test
	phase08_bin=$BIN/phase08-emu
	parity_bin=$BIN/phase08-emu.test
	parity_run='^TestCUDAEngineParity$/^gemma3$'
	tests='^(TestNewWithoutDevice|TestRequireGPU|TestKernelTableMatchesPTX|TestSyncModeNamesKernel|TestMatMulTOnViews|TestAttendLocal|TestRMSNorm)$'
	benchtime=1x
	phase08_args=(-requests 2 -prefix-len 16 -suffix-min 4 -suffix-max 8 -min-tokens 1 -max-tokens 2)
	full_args=("${phase08_args[@]}")
else
	test_bin=$BIN/cuda.test
	phase08_bin=$BIN/phase08-cuda
	parity_bin=$BIN/phase08-cuda.test
	parity_run='^(TestCUDAEngineParity|TestCUDAKVCacheDType)$'
	tests=.
	benchtime=500ms
	phase08_args=(-requests 16 -prefix-len 256 -suffix-min 16 -suffix-max 64 -min-tokens 16 -max-tokens 32)
	full_args=() # make phase08's own defaults
fi
for f in "$test_bin" "$phase08_bin" "$parity_bin"; do
	if [ ! -x "$f" ]; then
		echo "gpu-check: $f is missing: run scripts/gpu-check.sh --build on the build machine first" >&2
		exit 1
	fi
done

# step NAME CMD...: runs CMD with its output in $OUT/NAME.txt (and on the
# terminal), and records the outcome and time in the summary.
step() {
	local name=$1
	shift
	local start=$SECONDS rc
	echo "== $name: $*" | tee -a "$OUT/$name.txt"
	"$@" 2>&1 | tee -a "$OUT/$name.txt"
	rc=${PIPESTATUS[0]}
	printf '%-10s %s (%ds)\n' "$name" "$([ "$rc" -eq 0 ] && echo ok || echo "FAILED, exit $rc")" \
		$((SECONDS - start)) | tee -a "$OUT/summary.txt"
	[ "$rc" -eq 0 ] || failed=1
	return "$rc"
}

# skip NAME WHY: records a step that could not run here.
skip() { printf '%-10s skipped: %s\n' "$1" "$2" | tee -a "$OUT/summary.txt" "$OUT/$1.txt"; }

device() {
	if command -v nvidia-smi >/dev/null; then
		nvidia-smi
		nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total,clocks.max.sm --format=csv
	else
		echo "nvidia-smi: not installed (no NVIDIA driver on this machine)"
	fi
	echo "-- ldd $test_bin"
	ldd "$test_bin"
	echo "-- ldd $phase08_bin"
	ldd "$phase08_bin"
}
step device device

ptxas_counts() {
	for f in kernels/cuda/ptx/*.ptx; do
		echo "-- $f"
		ptxas -arch=sm_90 -v -o /dev/null "$f" 2>&1 | grep -E 'Compiling entry|Used|spill' || return 1
	done
}
if command -v ptxas >/dev/null; then
	step ptxas ptxas_counts
else
	skip ptxas "ptxas not installed"
fi

# The tests: one process for all, then each failing test alone under
# compute-sanitizer, which names the faulting access.
if ! step tests timeout 240 env KVLAB_REQUIRE_GPU=1 KVLAB_CUDA_SYNC=1 "$test_bin" -test.v -test.count=1 -test.run "$tests"; then
	fails=$(grep -oE '^--- FAIL: [A-Za-z0-9_]+' "$OUT/tests.txt" | awk '{print $3}' | sort -u)
	if [ -z "$fails" ]; then
		# A panic ends the binary before it reports: the last test started is the one.
		fails=$(grep -oE '^=== RUN +[A-Za-z0-9_]+' "$OUT/tests.txt" | tail -n 1 | awk '{print $3}')
	fi
	if command -v compute-sanitizer >/dev/null; then
		for t in $(echo $fails | tr ' ' '\n' | head -n 3); do # the first three: a lent GPU's time is short
			step "sanitize-$t" timeout 90 env KVLAB_REQUIRE_GPU=1 KVLAB_CUDA_SYNC=1 compute-sanitizer --tool memcheck \
				"$test_bin" -test.v -test.count=1 -test.run "^$t\$"
		done
	else
		skip sanitize "compute-sanitizer not installed (failing: $(echo $fails))"
	fi
fi

step parity timeout 120 env KVLAB_REQUIRE_GPU=1 "$parity_bin" -test.v -test.count=1 -test.run "$parity_run"

step bench env KVLAB_REQUIRE_GPU=1 "$test_bin" -test.run '^$' -test.bench 'BenchmarkMatMulT|BenchmarkAttend|BenchmarkDecodeStep' \
	-test.benchtime "$benchtime" -test.count=1

# cuBLAS: the machine's own library, wherever a CUDA install or a Python
# wheel put it; the program reports the HBM peak even without one.
if [ "$mode" = dry ]; then
	skip cublas "no device in a dry run"
elif [ -x "$BIN/cublas-gemm-bench" ]; then
	lib=${CUBLAS_LIB:-$(find /usr/local /usr/lib /opt /usr/lib64 /root -name 'libcublas.so.1[12]*' 2>/dev/null | sort | tail -n 1)}
	step cublas env ${lib:+CUBLAS_LIB=$lib} ${lib:+LD_LIBRARY_PATH=$(dirname "$lib")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}} \
		"$BIN/cublas-gemm-bench"
else
	skip cublas "$BIN/cublas-gemm-bench is missing"
fi

if python3 -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
	step torch python3 scripts/torch_gemm_bench.py --json "$OUT/torch_gemm.json"
else
	skip torch "PyTorch is not installed or sees no GPU"
fi

if command -v ncu >/dev/null; then
	step ncu ncu --kernel-name regex:paged_attention --launch-count 5 --section SpeedOfLight \
		--section MemoryWorkloadAnalysis --section Occupancy \
		"$test_bin" -test.run '^$' -test.bench 'BenchmarkAttendDecode' -test.benchtime 1x
else
	skip ncu "Nsight Compute (ncu) not installed"
fi

for dev in cuda cpu; do
	step "phase08-$dev" "$phase08_bin" -device "$dev" -workload prefix_caching "${phase08_args[@]}" \
		-rps 1000 -quiet -plot "" -json "$OUT/phase08-$dev.json"
done
# make phase08 on the built-in model, at its full size, on the GPU.
step phase08-full timeout 150 "$phase08_bin" -device cuda -arch llama -workload prefix_caching "${full_args[@]}" \
	-plot "$OUT/phase08-full.svg" -json "$OUT/phase08-full.json"
# The same with the KV pool in bf16 (-kv-cache-dtype): the 16-bit write,
# copy and attention kernels inside the whole engine.
step phase08-bf16 timeout 150 "$phase08_bin" -device cuda -arch llama -workload prefix_caching "${full_args[@]}" \
	-kv-cache-dtype bf16 -plot "" -json "$OUT/phase08-bf16.json"

echo "== summary ($OUT/summary.txt)"
cat "$OUT/summary.txt"
exit "$failed"
