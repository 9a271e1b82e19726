#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, runs every
# suite and ends with `tests: N passed, N failed`. Exits non-zero on any
# failure. Set SLUICE_REQUIRE_PRIVILEGED=1 to make privileged suites fail
# instead of skipping when they cannot run (CI does).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/build.sh
build_dir=${SLUICE_BUILD_DIR:-build}

rm -f "$build_dir"/meson-logs/testlog.*
status=0
meson test -C "$build_dir" --print-errorlogs || status=$?
python3 scripts/test-summary.py "$build_dir" || status=$?
exit "$status"
