#!/usr/bin/env bash
# Runs the libFuzzer harnesses (tests/fuzz/) for as long as asked:
#   bash scripts/fuzz.sh [--seconds N] [NAME...]   (default: $SLUICE_FUZZ_SECONDS or 60 s each, every harness)
# Builds the sanitizer build first (scripts/sanitize-build.sh) unless
# --no-build; `meson test --suite fuzz` runs it that way (scripts/test.sh sets
# SLUICE_FUZZ_SECONDS=10). Each harness starts from its checked-in
# corpus (tests/fuzz/corpus/NAME, replayed first) and keeps what it finds in
# <build>/fuzz-corpus/NAME; a crash is saved as <build>/fuzz-crashes/NAME-*
# and fails the run: fix it and add the input to the checked-in corpus.
# Prints one line per harness: runs, edges covered, corpus size.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${SLUICE_FUZZ_SECONDS:-60}
build_dir=${SLUICE_SANITIZE_DIR:-build-sanitize}
build=1
names=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    --build-dir) build_dir=$2; shift 2 ;;
    --no-build) build=0; shift ;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) names+=("$1"); shift ;;
  esac
done
if [[ $build == 1 ]]; then SLUICE_SANITIZE_DIR=$build_dir bash scripts/sanitize-build.sh; fi
if [[ ${#names[@]} == 0 ]]; then
  for dir in tests/fuzz/corpus/*/; do names+=("$(basename "$dir")"); done
fi

status=0
for name in "${names[@]}"; do
  exe=$build_dir/tests/fuzz/fuzz_$name
  if [[ ! -x $exe ]]; then echo "fuzz.sh: no harness $exe (is $build_dir configured with -Dfuzz=true?)" >&2; exit 2; fi
  work=$build_dir/fuzz-corpus/$name
  mkdir -p "$work" "$build_dir/fuzz-crashes"
  args=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
        -artifact_prefix="$build_dir/fuzz-crashes/$name-")
  if [[ -f tests/fuzz/dict/$name.dict ]]; then args+=(-dict="tests/fuzz/dict/$name.dict"); fi
  log=$build_dir/fuzz-crashes/$name.log
  if "$exe" "${args[@]}" "$work" "tests/fuzz/corpus/$name" > "$log" 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -1 || true)
    edges=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<< "$line")
    corpus=$(sed -n 's/.* corp: \([0-9]*\/[0-9]*[a-zA-Z]*\).*/\1/p' <<< "$line")
    echo "fuzz $name: ${runs:-?} runs in ${seconds} s, ${edges:-?} edges, corpus ${corpus:-?}"
  else
    status=1
    echo "fuzz $name: FAILED; the input is under $build_dir/fuzz-crashes/, the log:" >&2
    tail -60 "$log" >&2
  fi
done
exit "$status"
