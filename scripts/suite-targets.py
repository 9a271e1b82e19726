#!/usr/bin/env python3
# Prints the ninja targets the tests of the given suites need in a configured
# meson build directory, as `meson test --suite ...` would build them before
# running: scripts/test.sh builds the sanitizer build's share this way while
# the main suites run, instead of after them.
#
#   scripts/suite-targets.py BUILD_DIR SUITE...
import json
import os
import sys


def main() -> int:
    if len(sys.argv) < 3:
        print("usage: suite-targets.py BUILD_DIR SUITE...", file=sys.stderr)
        return 2
    build_dir, suites = sys.argv[1], set(sys.argv[2:])
    info = os.path.join(build_dir, "meson-info")
    with open(os.path.join(info, "intro-tests.json")) as f:
        tests = json.load(f)
    with open(os.path.join(info, "intro-targets.json")) as f:
        files_by_id = {t["id"]: t["filename"] for t in json.load(f)}
    wanted = set()
    for test in tests:
        # Suites are listed as "project:suite".
        if any(s.split(":")[-1] in suites for s in test["suite"]):
            wanted.update(test["depends"])
    targets = sorted(os.path.relpath(path, build_dir) for target in wanted for path in files_by_id[target])
    if not targets:
        print(f"suite-targets.py: no test of {' '.join(sorted(suites))} in {build_dir}", file=sys.stderr)
        return 1
    print("\n".join(targets))
    return 0


if __name__ == "__main__":
    sys.exit(main())
