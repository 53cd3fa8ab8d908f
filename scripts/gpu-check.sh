#!/usr/bin/env bash
# gpu-check.sh: the whole hardware check of the CUDA backend in one run, for
# a GPU machine that has the NVIDIA driver (and perhaps PyTorch, ptxas,
# compute-sanitizer, ncu) but no Go toolchain.
#
#   scripts/gpu-check.sh --build     on the build machine (Debian 12, Go):
#                                    make cuda-deps, bin/cuda.test,
#                                    bin/phase08-cuda
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
#   bench      the matmul and attention benchmarks, and the decode step's
#              host overhead with async and with pageable metadata uploads
#   torch      scripts/torch_gemm_bench.py (cuBLAS on the same shapes), if
#              PyTorch sees the GPU
#   ncu        Nsight Compute on the decode-attention kernel, if installed
#   phase08    the phase-8 comparison on a small workload, -device cuda and
#              -device cpu (each checks that the caches reproduce the
#              baseline's tokens)
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
	make cuda-test BIN="$BIN"
	go build -tags cuda -o "$BIN/phase08-cuda" ./phase08
	echo "built $BIN/cuda.test and $BIN/phase08-cuda; run scripts/gpu-check.sh on the GPU machine"
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
	set +e
	test_bin=$BIN/cuda-emu.test
	phase08_bin=$BIN/phase08-emu
	tests='^(TestNewWithoutDevice|TestRequireGPU|TestKernelTableMatchesPTX|TestSyncModeNamesKernel|TestMatMulTOnViews|TestAttendLocal|TestRMSNorm)$'
	benchtime=1x
	phase08_args=(-requests 2 -prefix-len 16 -suffix-min 4 -suffix-max 8 -min-tokens 1 -max-tokens 2)
else
	test_bin=$BIN/cuda.test
	phase08_bin=$BIN/phase08-cuda
	tests=.
	benchtime=2s
	phase08_args=(-requests 16 -prefix-len 256 -suffix-min 16 -suffix-max 64 -min-tokens 16 -max-tokens 32)
fi
for f in "$test_bin" "$phase08_bin"; do
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
if ! step tests env KVLAB_REQUIRE_GPU=1 KVLAB_CUDA_SYNC=1 "$test_bin" -test.v -test.count=1 -test.run "$tests"; then
	fails=$(grep -oE '^--- FAIL: [A-Za-z0-9_]+' "$OUT/tests.txt" | awk '{print $3}' | sort -u)
	if [ -z "$fails" ]; then
		# A panic ends the binary before it reports: the last test started is the one.
		fails=$(grep -oE '^=== RUN +[A-Za-z0-9_]+' "$OUT/tests.txt" | tail -n 1 | awk '{print $3}')
	fi
	if command -v compute-sanitizer >/dev/null; then
		for t in $fails; do
			step "sanitize-$t" env KVLAB_REQUIRE_GPU=1 KVLAB_CUDA_SYNC=1 compute-sanitizer --tool memcheck \
				"$test_bin" -test.v -test.count=1 -test.run "^$t\$"
		done
	else
		skip sanitize "compute-sanitizer not installed (failing: $(echo $fails))"
	fi
fi

step bench env KVLAB_REQUIRE_GPU=1 "$test_bin" -test.run '^$' -test.bench 'BenchmarkMatMulT|BenchmarkAttend|BenchmarkDecodeStep' \
	-test.benchtime "$benchtime" -test.count=1

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

echo "== summary ($OUT/summary.txt)"
cat "$OUT/summary.txt"
exit "$failed"
