#!/usr/bin/env bash
# Hunts tests that fail by chance: runs one meson suite N times (default 6),
# every other run with a busy loop pinned to the last CPU (a loaded machine,
# as CI's can be), and prints each test case that failed with how often,
# idle and busy. Exits non-zero if any case failed.
#
#   bash scripts/flake-hunt.sh SUITE [N]      e.g. bpf, e2e, dpdk, fleet, unit, bench
#
# Uses the main build ($SLUICE_BUILD_DIR, default build; built first). A
# case that fails here fails CI some day: fix the test (a simulated clock, a
# bound computed from what the machine delivered, an event instead of a
# sleep), not the count of runs. Each run's meson log stays in
# BUILD/meson-logs/flake-hunt-SUITE-RUN.txt.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ $# -lt 1 || $1 == -h || $1 == --help ]]; then sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 2; fi
suite=$1
runs=${2:-6}
build_dir=${SLUICE_BUILD_DIR:-build}
unset GTEST_FILTER
bash scripts/build.sh >/dev/null

busy_pid=
stop_busy() { if [[ -n $busy_pid ]]; then kill "$busy_pid" 2>/dev/null || true; wait "$busy_pid" 2>/dev/null || true; busy_pid=; fi; }
tally=$(mktemp /tmp/sluice-flake-hunt.XXXXXX)
trap 'stop_busy; rm -f "$tally" "$tally.stamp"' EXIT

for ((run = 1; run <= runs; run++)); do
  load=idle
  if ((run % 2 == 0)); then
    load=busy
    taskset -c "$(($(nproc) - 1))" bash -c 'while :; do :; done' &
    busy_pid=$!
  fi
  touch "$tally.stamp"
  log=$build_dir/meson-logs/flake-hunt-$suite-$run.txt
  start=$SECONDS
  meson test -C "$build_dir" --no-rebuild --suite "$suite" --print-errorlogs >"$log" 2>&1 || true
  stop_busy
  # One line per failed case of this run: "<load> <test> :: <case>".
  python3 - "$build_dir" "$suite" "$tally.stamp" "$load" >>"$tally" <<'PY'
import importlib.util, sys
from pathlib import Path
spec = importlib.util.spec_from_file_location("summary", "scripts/test-summary.py")
summary = importlib.util.module_from_spec(spec)
spec.loader.exec_module(summary)
build_dir, suite, stamp, load = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
since = Path(stamp).stat().st_mtime
results = summary.run_results(build_dir, since)
for test in summary.defined_tests(build_dir):
    if suite not in summary.suites_of(test):
        continue
    name, result = test["name"], results.get(test["name"])
    cases = summary.gtest_cases(build_dir / f"{name}.xml", since) if test["protocol"] == "gtest" else None
    failed = cases[1] if cases else []
    for case in failed:
        print(f"{load} {name} :: {case}")
    if result not in summary.PASSING and not failed:
        print(f"{load} {name} :: (the whole test ended {result})")
PY
  echo "flake-hunt: $suite run $run/$runs ($load): $(grep -c "^$load " "$tally" || true) failures so far under $load load, $((SECONDS - start)) s"
done

idle_runs=$(((runs + 1) / 2))
busy_runs=$((runs / 2))
if [[ ! -s $tally ]]; then
  echo "flake-hunt: $suite: no failure in $runs runs ($idle_runs idle, $busy_runs with a busy CPU)"
  exit 0
fi
echo "flake-hunt: $suite: failures in $runs runs ($idle_runs idle, $busy_runs with a busy CPU):"
cut -d' ' -f2- "$tally" | sort -u | while read -r case; do
  idle=$(grep -cxF "idle $case" "$tally" || true)
  busy=$(grep -cxF "busy $case" "$tally" || true)
  echo "  $case: idle $idle/$idle_runs, busy $busy/$busy_runs"
done
exit 1
