#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, runs every
# suite and ends with `tests: N passed, N failed`. Exits non-zero on any
# failure. Set SLUICE_REQUIRE_PRIVILEGED=1 to make privileged suites fail
# instead of skipping when they cannot run, and any skipped case a failure
# (CI does).
#
# Two builds: the main one (every suite) and the sanitizer build
# (scripts/sanitize-build.sh: clang, ASan + UBSan), which runs the unit, e2e
# and dpdk suites again and each fuzzer for SLUICE_FUZZ_SECONDS (default 10)
# after replaying its corpus. The suites expected are fixed here, so a suite
# the configuration dropped fails the run (scripts/test-summary.py).
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=${SLUICE_BUILD_DIR:-build}
sanitize_dir=${SLUICE_SANITIZE_DIR:-build-sanitize}
main_suites=unit,bpf,e2e,fleet,dpdk,packaging,bench,man
sanitized_suites=unit,e2e,dpdk,fuzz
# A filter inherited from the caller's shell would quietly run fewer cases.
unset GTEST_FILTER
# Where the time goes, printed at the end. The budget: 20 minutes on a
# machine that ran it before (ccache), 30 on a fresh one.
phase_times=()
phase_start=$SECONDS
# Background jobs (the package build, the suites) do not outlive the script.
stamp=
cleanup() {
  local jobs_left
  jobs_left=$(jobs -pr)
  if [[ -n $jobs_left ]]; then kill $jobs_left 2>/dev/null || true; fi
  if [[ -n $stamp ]]; then rm -f "$stamp"; fi
}
trap cleanup EXIT
end_phase() { phase_times+=("$1 $((SECONDS - phase_start)) s"); phase_start=$SECONDS; }

bash scripts/build.sh
end_phase "build"
# Configured first (its dependencies installed), so that nothing below
# runs apt beside the package build.
SLUICE_SANITIZE_DIR=$sanitize_dir bash scripts/sanitize-build.sh --configure-only
# The Debian packages the packaging suite installs and purges
# (tests/packaging/package_test.cpp); without them (not root, or the build
# failed) that suite skips, and fails under SLUICE_REQUIRE_PRIVILEGED. No
# debug-symbol packages: nothing here installs or checks them. Built beside
# the sanitizer build: packaging is mostly single-threaded (dh, dpkg-deb,
# lintian), and the package's compile hits ccache after the main build's.
rm -rf "$build_dir/packages"
package_output=$build_dir/meson-logs/package-output.txt
package_pid=
if [[ $EUID -eq 0 ]]; then
  DEB_BUILD_OPTIONS="noddebs${DEB_BUILD_OPTIONS:+ $DEB_BUILD_OPTIONS}" \
    bash scripts/package.sh "$build_dir/packages" >"$package_output" 2>&1 &
  package_pid=$!
fi
# Only what the sanitized suites need (not the BPF and fleet-redis tests),
# before any suite runs.
sanitized_targets=$(python3 scripts/suite-targets.py "$sanitize_dir" "$sanitized_suites")
# shellcheck disable=SC2086  # one target per word
ninja -C "$sanitize_dir" $sanitized_targets
package_status=0
if [[ -n $package_pid ]]; then
  wait "$package_pid" || package_status=$?
  cat "$package_output"
fi
end_phase "package and sanitizer build"

# Results older than this run are not read (scripts/test-summary.py).
stamp=$(mktemp /tmp/sluice-test-run.XXXXXX)
rm -f "$build_dir"/meson-logs/testlog.* "$sanitize_dir"/meson-logs/testlog.*
# The two builds' suites run side by side, each build's one after another:
# they wait on daemons, packets and the verifier far more than on a CPU, so
# together they take little longer than the slower of them alone (their
# real-clock tests measure what the machine gave them; scripts/flake-hunt.sh
# runs them beside a busy CPU). Each prints to its own file, shown in turn.
#
# Any ASan or UBSan report ends the process with an error: the test fails,
# and so does an e2e test whose child sluiced reported one in its log. The
# options are this script's own, not inherited: a caller's could turn
# reports off. The cases that cannot run sanitized are not compiled there
# (tests/common/sanitized.h).
main_output=$build_dir/meson-logs/suites-output.txt
sanitized_output=$sanitize_dir/meson-logs/suites-output.txt
meson test -C "$build_dir" --print-errorlogs >"$main_output" 2>&1 &
main_pid=$!
sanitized_args=()
for suite in ${sanitized_suites//,/ }; do sanitized_args+=(--suite "$suite"); done
SLUICE_FUZZ_SECONDS=${SLUICE_FUZZ_SECONDS:-10} \
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  meson test -C "$sanitize_dir" --no-rebuild --print-errorlogs --timeout-multiplier 4 "${sanitized_args[@]}" \
  >"$sanitized_output" 2>&1 &
sanitized_pid=$!
status=$package_status
wait "$main_pid" || status=$?
wait "$sanitized_pid" || status=$?
for output in "$main_output" "$sanitized_output"; do
  echo "==== $output"
  cat "$output"
done
end_phase "suites of both builds"
echo "time: $(IFS=,; echo "${phase_times[*]}" | sed 's/,/, /g')"
summary_args=(--since "$stamp")
if [[ ${SLUICE_REQUIRE_PRIVILEGED:-0} != 0 && -n ${SLUICE_REQUIRE_PRIVILEGED:-} ]]; then summary_args+=(--skips-fail); fi
python3 scripts/test-summary.py "${summary_args[@]}" "$build_dir=$main_suites" "$sanitize_dir:$sanitized_suites" || status=$?
exit "$status"
