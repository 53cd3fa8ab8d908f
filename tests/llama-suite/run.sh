#!/usr/bin/env bash
# run.sh runs llama.cpp's own server tests (tools/server/tests, pytest)
# against `phase08_prefix serve` through the flag-mapping shim (shim/), and,
# given a llama.cpp build, against the real llama-server on the same model
# (serve's built-in model exported to GGUF) as the control. It prints the
# per-file table and the tests that pass on the control and fail on serve,
# and writes them under OUT (default out/llama-suite).
#
#   LLAMA_CPP_SRC=<llama.cpp checkout> [LLAMA_CPP_DIR=<build>] bash tests/llama-suite/run.sh [test files]
#
# The files default to the ones named in docs/serving.md's section
# "llama.cpp's server tests". Python packages come from Debian:
# python3-pytest python3-requests python3-aiohttp python3-wget python3-numpy
# python3-pytest-timeout python3-prometheus-client; the `openai` client,
# which Debian lacks, is an import stub (stub/openai).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
: "${LLAMA_CPP_SRC:?set LLAMA_CPP_SRC to a llama.cpp checkout (its tools/server/tests is run)}"
tests=$(cd "$LLAMA_CPP_SRC/tools/server/tests" && pwd)
out=${OUT:-$root/out/llama-suite}
timeout=${TEST_TIMEOUT:-60}
port=${PORT:-18080}
python=${LLAMA_SUITE_PYTHON:-}
if [ -z "$python" ]; then
  # Debian's interpreter, where the python3-* packages are, before any other on PATH.
  if [ -x /usr/bin/python3 ]; then python=/usr/bin/python3; else python=python3; fi
fi

files=("$@")
if [ ${#files[@]} -eq 0 ]; then
  for f in basic completion chat_completion tokenize slot_save metrics stream ctx_shift \
    security template ignore_eos kv_keep_only_active; do
    files+=("unit/test_$f.py")
  done
fi

if ! "$python" -c 'import pytest, requests, aiohttp, wget, numpy, pytest_timeout, prometheus_client' 2>/dev/null; then
  echo "run.sh: $python lacks the suite's packages; on Debian:" >&2
  echo "  apt-get install python3-pytest python3-requests python3-aiohttp python3-wget python3-numpy python3-pytest-timeout python3-prometheus-client" >&2
  exit 2
fi

mkdir -p "$out/bin"
echo "== building the shim and phase08_prefix into $out/bin"
(cd "$root" && go build -o "$out/bin/llama-server-shim" ./tests/llama-suite/shim)
# SERVE_BIN: a phase08_prefix built elsewhere (another commit's), instead of this tree's.
if [ -n "${SERVE_BIN:-}" ]; then cp "$SERVE_BIN" "$out/bin/phase08_prefix"; else (cd "$root" && go build -o "$out/bin/phase08_prefix" ./phase08_prefix); fi

# suite TARGET BIN: one pytest run of the files against TARGET, its JUnit
# XML in $out/TARGET.xml and its output in $out/TARGET.log.
suite() {
  local target=$1 bin=$2
  echo "== llama.cpp's server tests against $target ($bin), ${timeout}s a test"
  rm -f "$out/unmapped-$target.log"
  (cd "$tests" && env \
    LLAMA_SERVER_BIN_PATH="$out/bin/llama-server-shim" \
    KVLAB_SHIM_TARGET="$target" KVLAB_SHIM_BIN="$bin" KVLAB_SHIM_GGUF="$out/builtin.gguf" \
    KVLAB_SHIM_LOG="$out/unmapped-$target.log" \
    PORT="$port" PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$here/stub${PYTHONPATH:+:$PYTHONPATH}" \
    "$python" -m pytest -p no:cacheprovider -q -rN --timeout="$timeout" \
      --junitxml="$out/$target.xml" "${files[@]}" >"$out/$target.log" 2>&1) || true
  tail -n 1 "$out/$target.log"
}

suite serve "$out/bin/phase08_prefix"

control=()
if [ -n "${LLAMA_CPP_DIR:-}" ]; then
  llama=
  for p in "$LLAMA_CPP_DIR/bin/llama-server" "$LLAMA_CPP_DIR/build/bin/llama-server" "$LLAMA_CPP_DIR/llama-server"; do
    if [ -x "$p" ]; then llama=$p; break; fi
  done
  if [ -z "$llama" ]; then
    echo "run.sh: no llama-server under $LLAMA_CPP_DIR (looked in bin, build/bin and the folder itself)" >&2
    exit 2
  fi
  "$out/bin/phase08_prefix" export-gguf -out "$out/builtin.gguf"
  suite llama-server "$llama"
  control=(--control "$out/llama-server.xml")
fi

commit=${LLAMA_CPP_COMMIT:-$(git -C "$LLAMA_CPP_SRC" rev-parse --short HEAD 2>/dev/null || echo "unknown commit")}
"$python" "$here/report.py" --serve "$out/serve.xml" "${control[@]}" \
  --unmapped "$out/unmapped-serve.log" \
  --title "llama.cpp $commit tools/server/tests, $(date -u +%Y-%m-%dT%H:%MZ)" \
  --table "$out/table.txt" --failures "$out/failures-serve.txt"
