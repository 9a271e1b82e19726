#!/usr/bin/env bash
# Configures (once) and builds the sanitizer build in $SLUICE_SANITIZE_DIR
# (default: build-sanitize): clang 14, ASan + UBSan (any report fails the
# process), libFuzzer's coverage hooks and the harnesses in tests/fuzz/.
# scripts/test.sh runs the unit, e2e, dpdk and fuzz suites from it, with
# --configure-only: `meson test` then builds just what those suites need;
# scripts/fuzz.sh runs the harnesses for as long as asked.
#
# -O0 with line tables: it compiles in a third of -O2's time, and the suites
# it runs wait on sockets and packets rather than on the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
source scripts/ccache-env.sh
build_dir=${SLUICE_SANITIZE_DIR:-build-sanitize}
if [[ ! -f $build_dir/build.ninja ]]; then
  # Named with ccache in front: meson adds ccache only to compilers it picks itself.
  CC="ccache clang" CXX="ccache clang++" meson setup "$build_dir" -Ddpdk=enabled -Dbench=false -Dfuzz=true \
    -Db_sanitize=address,undefined -Db_lundef=false -Doptimization=0 -Ddebug=false \
    "-Dc_args=-g1 -fno-sanitize-recover=all" "-Dcpp_args=-g1 -fno-sanitize-recover=all"
fi
if [[ ${1:-} != --configure-only ]]; then ninja -C "$build_dir"; fi
