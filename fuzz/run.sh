#!/usr/bin/env bash
# Build every cargo-fuzz target and run each for SECONDS (default 20) over
# its committed corpus, fuzz/corpus/<target>/. A crash, a failed property,
# a timeout or running out of memory fails the run; the input is kept in
# fuzz/artifacts/<target>/ and printed as hex. What the fuzzer finds is
# written to a scratch directory, never to the committed corpus.
#
#   bash fuzz/run.sh [SECONDS]
#
# Stable Rust is enough: RUSTC_BOOTSTRAP=1 lets cargo-fuzz pass the -Z
# flags it needs (stable's rust-std ships the AddressSanitizer runtime).
# FUZZ_SANITIZER=none builds without AddressSanitizer, FUZZ_DEV=1 without
# optimisation (both build faster, run slower); FUZZ_JOBS sets how many
# targets run at once (default: the number of CPUs).
set -euo pipefail
secs=${1:-20}
cd "$(dirname "$0")"
export RUSTC_BOOTSTRAP=1 CARGO_TERM_COLOR=never

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "installing cargo-fuzz"
  cargo install --locked cargo-fuzz
fi

sanitizer=${FUZZ_SANITIZER:-address}
triple=$(rustc -vV | sed -n 's/^host: //p')
profile=release dev=()
if [ "${FUZZ_DEV:-0}" = 1 ]; then profile=debug dev=(--dev); fi
start=$SECONDS
cargo fuzz build --sanitizer "$sanitizer" "${dev[@]}"
echo "built in $((SECONDS - start)) s (sanitizer: $sanitizer, $profile)"

targets=$(cargo fuzz list)
for t in $targets; do
  [ -d "corpus/$t" ] || { echo "fuzz/corpus/$t is missing: commit a seed corpus" >&2; exit 1; }
done
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export secs scratch triple profile

# One target: its new inputs go to the scratch directory (the first one
# libFuzzer names is where it writes), its log to the scratch too.
run_one() {
  local t=$1
  mkdir -p "$scratch/$t" "artifacts/$t"
  if "target/$triple/$profile/$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="artifacts/$t/" \
    "$scratch/$t" "corpus/$t" >"$scratch/$t.log" 2>&1; then
    echo ok >"$scratch/$t.status"
  else
    echo failed >"$scratch/$t.status"
  fi
}
export -f run_one
start=$SECONDS
printf '%s\n' $targets | xargs -P "${FUZZ_JOBS:-$(nproc)}" -I{} bash -c 'run_one {}'
echo "fuzzed $(echo $targets | wc -w) targets for ${secs} s each in $((SECONDS - start)) s"

failed=0
printf '%-24s %-7s %12s %10s\n' target result executions exec/s
for t in $targets; do
  status=$(cat "$scratch/$t.status")
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$scratch/$t.log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$scratch/$t.log" | tail -1)
  printf '%-24s %-7s %12s %10s\n' "$t" "$status" "${execs:-?}" "${rate:-?}"
  if [ "$status" != ok ]; then
    failed=1
    echo "---- $t: the end of libFuzzer's log" >&2
    tail -40 "$scratch/$t.log" >&2
    for a in $(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$scratch/$t.log"); do
      echo "---- $t: $a (hex); replay: (cd fuzz && cargo fuzz run $t $a)" >&2
      od -An -tx1 -v "$a" | head -64 >&2
    done
  fi
done
if [ "$failed" != 0 ]; then
  echo "fuzzing failed: keep the input in fuzz/corpus/<target>/, fix the parser and add a unit test" >&2
  exit 1
fi
