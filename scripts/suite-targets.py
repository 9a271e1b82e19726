#!/usr/bin/env python3
"""Prints the ninja targets the tests of the given suites need, one per line.

usage: suite-targets.py BUILD_DIR SUITE[,SUITE...]

scripts/test.sh builds the sanitizer build's suites with these before running
them beside the main build's: `meson test` would otherwise compile while the
other build's suites run.
"""
import json
import os
import subprocess
import sys


def introspect(build_dir, what):
    return json.loads(subprocess.check_output(["meson", "introspect", what, build_dir]))


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[2])
    build_dir, wanted = sys.argv[1], set(sys.argv[2].split(","))
    tests = introspect(build_dir, "--tests")
    files_by_id = {t["id"]: t["filename"] for t in introspect(build_dir, "--targets")}
    needed = set()
    for test in tests:
        # meson names a suite "project:suite".
        if any(suite.split(":")[-1] in wanted for suite in test["suite"]):
            needed.update(test["depends"])
    if not needed:
        sys.exit(f"suite-targets.py: no test of {build_dir} is in the suites {sorted(wanted)}")
    root = os.path.realpath(build_dir)
    for target_id in sorted(needed):
        for path in files_by_id[target_id]:
            print(os.path.relpath(path, root))


if __name__ == "__main__":
    main()
