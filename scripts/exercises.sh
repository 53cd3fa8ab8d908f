#!/usr/bin/env bash
# The exercises under exercises/: each undoes one production fix with a
# patch, in a scratch copy of the repository, and runs the test that
# catches it. The working tree is never touched.
#
#   scripts/exercises.sh list           the exercises, their families and questions
#   scripts/exercises.sh run N          ask exercise N's question, then show its test failing
#   scripts/exercises.sh show N         the fix the patch undoes, and the PITFALLS.md entry
#   scripts/exercises.sh check [N...]   every exercise (or those named): its test passes
#                                       without the patch and fails with it (CI runs this)
#
# `make exercise`, `make exercise EX=N`, `make exercise EX=N SHOW=fix` and
# `make exercises-check` call it. KEEP=1 keeps the scratch copy of `run`.
# Every line `check` prints fits in $WIDTH columns (120 unless set): it is
# read in CI logs, and test output it quotes is folded at spaces.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
GO=${GO:-go}
WIDTH=${WIDTH:-120}

# fit folds its input to $WIDTH columns, at spaces where it can, so that
# quoted test output keeps all its words.
fit() {
  fold -s -w "$WIDTH"
}

# SCRATCH is the scratch copy in use, removed on exit unless KEEP=1.
SCRATCH=
cleanup() {
  if [ -n "$SCRATCH" ] && [ "${KEEP:-}" != 1 ]; then
    rm -rf "$SCRATCH" "$SCRATCH.orig"
  fi
}
trap cleanup EXIT

# field DIR NAME prints the value of the README's "- NAME: ..." line.
field() {
  sed -n "s/^- $2: //p" "$1/README.md" | head -n 1
}

# testof DIR prints "TestName package-dir" from the README's Test line,
# written as: - Test: `TestName` in `package/dir/`
testof() {
  sed -n 's/^- Test: `\([A-Za-z0-9_]*\)` in `\([^`]*\)`.*/\1 \2/p' "$1/README.md" | head -n 1
}

# section FILE HEADING prints the Markdown section that starts with the
# line HEADING, up to the next heading of the same or a higher level.
section() {
  awk -v h="$2" '
    $0 == h { on = 1; level = index($0, " "); print; next }
    on && /^#+ / && index($0, " ") <= level { exit }
    on { print }
  ' "$1"
}

# question DIR prints the README's "## Predict" section, without its heading.
question() {
  section "$1/README.md" "## Predict" | tail -n +2 | awk 'NF { for (; blank > 0; blank--) print ""; print; seen = 1; next } seen { blank++ }'
}

title() {
  sed -n '1s/^# //p' "$1/README.md"
}

all() {
  for d in "$root"/exercises/[0-9][0-9]-*/; do
    [ -f "$d/README.md" ] && echo "${d%/}"
  done
}

find_exercise() {
  local n
  n=$(printf '%02d' "$((10#$1))" 2>/dev/null) || { echo "exercise number expected, have '$1'" >&2; exit 2; }
  local d=("$root"/exercises/"$n"-*/)
  if [ ! -f "${d[0]}/README.md" ]; then
    echo "no exercise $1 (make exercise lists them)" >&2
    exit 2
  fi
  echo "${d[0]%/}"
}

# scratch prints a fresh directory holding a copy of the repository's
# tracked files as they are in the working tree (or every file but .git,
# bin and out when the repository is not a git checkout).
scratch() {
  local dst
  dst=$(mktemp -d "${TMPDIR:-/tmp}/kvlab-exercise.XXXXXX")
  if git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    (cd "$root" && git ls-files -z | tar --null --ignore-failed-read -T - -cf - 2>/dev/null) | tar -xf - -C "$dst"
  else
    (cd "$root" && tar --exclude=./.git --exclude=./bin --exclude=./out -cf - .) | tar -xf - -C "$dst"
  fi
  echo "$dst"
}

# gotest DIR NAME PKG runs one test in the copy at DIR; its output goes to
# stdout, its status is the return value.
gotest() {
  (cd "$1" && $GO test -count=1 -v -run "^$2\$" "./$3")
}

cmd_list() {
  echo "Exercises: each undoes one production fix in a scratch copy and runs the test that catches it."
  echo "Run one with: make exercise EX=N   (then: make exercise EX=N SHOW=fix)"
  echo
  for d in $(all); do
    local n=${d##*/}
    echo "  ${n%%-*}. $(title "$d" | sed 's/^Exercise [0-9]*: //')  [$(field "$d" Family)]"
    question "$d" | sed -n '1,/^$/p' | tr '\n' ' ' | sed 's/  *$//' | fold -s -w 72 | sed 's/ *$//; s/^/      /'
    echo
  done
}

cmd_run() {
  local d t pkg rc
  d=$(find_exercise "$1")
  read -r t pkg <<<"$(testof "$d")"
  echo "== $(title "$d")"
  echo "   family: $(field "$d" Family); patch: ${d#"$root"/}/bug.patch"
  echo
  question "$d"
  echo
  if [ -t 0 ] && [ -t 1 ]; then
    read -r -p "Write down your prediction, then press Enter to run $t with the fix undone... " _
  else
    echo "(Predict first; the run follows.)"
  fi
  SCRATCH=$(scratch)
  local dir=$SCRATCH
  (cd "$dir" && git apply "$d/bug.patch") || {
    echo "bug.patch no longer applies to this tree: the code it changes has moved on" >&2
    exit 1
  }
  echo "== go test -v -run '^$t\$' ./$pkg   (in a scratch copy with bug.patch applied)"
  set +e
  gotest "$dir" "$t" "$pkg"
  rc=$?
  set -e
  echo
  if [ "$rc" = 0 ]; then
    echo "!! $t passed with the patch applied: the exercise no longer shows its bug."
  else
    echo "== $t failed, as it should with the fix undone. Was it the symptom you predicted?"
    # Some lines mislead with the patch applied; the README says how.
    if grep -q '^## Reading the symptom line' "$d/README.md"; then
      echo
      section "$d/README.md" "## Reading the symptom line"
    fi
  fi
  echo "   The fix: make exercise EX=$1 SHOW=fix"
  if [ "${KEEP:-}" = 1 ]; then
    echo "   The patched copy is kept in $dir"
  fi
  [ "$rc" != 0 ]
}

cmd_show() {
  local d entry file heading
  d=$(find_exercise "$1")
  echo "== $(title "$d"): the fix that bug.patch undoes"
  echo
  # The fix is the patch reversed: apply it to a copy of the files it
  # touches and diff back to the originals.
  SCRATCH=$(scratch)
  local dir=$SCRATCH
  cp -r "$dir" "$dir.orig"
  (cd "$dir" && git apply "$d/bug.patch")
  for f in $(cd "$dir" && git apply --numstat "$d/bug.patch" | cut -f3); do
    diff -u --label "a/$f" --label "b/$f" "$dir/$f" "$dir.orig/$f" || true
  done
  echo
  entry=$(field "$d" Entry)
  file=$(echo "$entry" | sed -n 's/^`\([^`]*\)`.*/\1/p')
  heading=$(echo "$entry" | sed -n 's/^`[^`]*`, section "\(.*\)"$/\1/p')
  if [ -n "$file" ] && [ -n "$heading" ]; then
    echo "== $file"
    echo
    section "$root/$file" "$(grep -m1 -E "^#+ $(printf '%s' "$heading" | sed 's/[][\.*^$/]/\\&/g')\$" "$root/$file")"
  fi
  if grep -q '^## After' "$d/README.md"; then
    echo
    section "$d/README.md" "## After"
  fi
}

cmd_check() {
  local list=() d t pkg out failed=0 start
  if [ $# -gt 0 ]; then
    for n in "$@"; do list+=("$(find_exercise "$n")"); done
  else
    mapfile -t list < <(all)
  fi
  [ ${#list[@]} -gt 0 ] || { echo "no exercises found" >&2; exit 1; }
  SCRATCH=$(scratch)
  local dir=$SCRATCH
  # Without the patches: every named test in one go test run, which builds
  # the packages in parallel.
  local names=() pkgs=() base
  for d in "${list[@]}"; do
    read -r t pkg <<<"$(testof "$d")"
    if [ -z "$t" ]; then
      echo "FAIL ${d#"$root"/}: no '- Test: \`TestName\` in \`package/\`' line in its README.md"
      return 1
    fi
    names+=("$t")
    pkgs+=("./$pkg")
  done
  start=$SECONDS
  local re uniq
  re=$(IFS='|'; echo "^(${names[*]})\$")
  mapfile -t uniq < <(printf '%s\n' "${pkgs[@]}" | sort -u)
  base=$(cd "$dir" && $GO test -count=1 -v -run "$re" "${uniq[@]}" 2>&1) || true
  echo "     the named tests without the patches: $((SECONDS - start))s"
  # Each exercise gets two lines, its directory and then its test, so that
  # the longest names still fit.
  for d in "${list[@]}"; do
    start=$SECONDS
    read -r t pkg <<<"$(testof "$d")"
    local name=${d#"$root"/}
    local which="     $t in $pkg"
    if ! grep -q -- "^--- PASS: $t " <<<"$base"; then
      printf '%s\n' "FAIL $name: its test does not pass without the patch" "$which"
      if grep -q -- "--- FAIL: $t\b" <<<"$base"; then
        grep -A 20 -- "--- FAIL: $t\b" <<<"$base" | head -n 20 | fit || true
      else
        echo "     it did not run (a wrong name, or a build error); go test said:"
        grep -E "^(# |FAIL|ok )|\.go:[0-9]+:[0-9]+: " <<<"$base" | head -n 20 | fit || true
      fi
      failed=1
      continue
    fi
    if ! err=$(cd "$dir" && git apply "$d/bug.patch" 2>&1); then
      printf '%s\n' "FAIL $name: bug.patch does not apply" "$which"
      fit <<<"$err"
      failed=1
      continue
    fi
    if out=$(gotest "$dir" "$t" "$pkg" 2>&1); then
      printf '%s\n' "FAIL $name: its test still passes with bug.patch applied" "$which"
      failed=1
    elif ! grep -q -- "--- FAIL: $t\b" <<<"$out"; then
      printf '%s\n' "FAIL $name: its test did not run to a failure with bug.patch (a build error?)" "$which"
      tail -n 20 <<<"$out" | fit
      failed=1
    else
      printf '%s\n' "ok   $name: its test passes, and fails with bug.patch ($((SECONDS - start))s)" "$which"
    fi
    (cd "$dir" && git apply -R "$d/bug.patch")
  done
  return $failed
}

case "${1:-list}" in
list) cmd_list ;;
run) cmd_run "${2:?exercise number}" ;;
show) cmd_show "${2:?exercise number}" ;;
check) shift; cmd_check "$@" ;;
*) echo "usage: $0 list | run N | show N | check [N...]" >&2; exit 2 ;;
esac
