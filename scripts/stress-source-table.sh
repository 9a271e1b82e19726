#!/usr/bin/env bash
# The per-source bound's stress test for longer than CI runs it: rounds of
# the decision core on oversubscribed threads with a pause before every
# shared access, tables that churn, colliding tags and policy changes
# (tests/unit/source_stress_test.cpp), every window of every bucket checked.
#
#   bash scripts/stress-source-table.sh [ROUNDS] [DECISIONS]   default 400 rounds of 200,000
#
# Uses the main build ($SLUICE_BUILD_DIR, default build; built first).
# SLUICE_TEST_SEED replays a run; each failure prints the round's scenario.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ ${1:-} == -h || ${1:-} == --help ]]; then sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 2; fi
build_dir=${SLUICE_BUILD_DIR:-build}
bash scripts/build.sh >/dev/null
SLUICE_STRESS_ROUNDS=${1:-400} SLUICE_STRESS_DECISIONS=${2:-200000} \
  exec "$build_dir/tests/unit/source_stress_tests"
