#!/usr/bin/env bash
# The README's main-job command. Until sluiced exists (issue #4) the main job
# is the decision core's benchmark: it installs what is missing, builds
# everything (the BPF object included) and prints ns per decision.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/build.sh
build_dir=${SLUICE_BUILD_DIR:-build}
echo
echo "The live XDP demo (sluiced + sluicectl on a veth pair) arrives with issue #4."
echo "Meanwhile: ns per decision of the shared core on this host."
exec "$build_dir/bench/core_bench" --benchmark_min_time=0.2
