#!/usr/bin/env python3
"""Prints `tests: N passed, N failed[, N skipped]` from a meson test run.

Counts real test cases: meson merges every GoogleTest case into
meson-logs/testlog.junit.xml. A suite that died before writing its results
(a crash, a timeout) has no failed case there, so each such suite counts as
one failure from meson's own log. Exits non-zero if anything failed.
"""
import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def main(build_dir: str) -> int:
    logs = Path(build_dir) / "meson-logs"
    passed = failed = skipped = 0
    failed_suites = set()
    junit = logs / "testlog.junit.xml"
    if junit.exists():
        for suite in ET.parse(junit).getroot().iter("testsuite"):
            for case in suite.iter("testcase"):
                if case.find("failure") is not None or case.find("error") is not None:
                    failed += 1
                    failed_suites.add(suite.get("name", ""))
                    print(f"FAILED: {suite.get('name')} :: {case.get('name')}")
                elif case.find("skipped") is not None or case.get("result") == "skipped":
                    skipped += 1
                else:
                    passed += 1

    log = logs / "testlog.json"
    if log.exists():
        for line in log.read_text().splitlines():
            entry = json.loads(line)
            if entry["result"] in ("OK", "SKIP", "EXPECTEDFAIL"):
                continue
            # junit suites are named "<project>.<meson test>.<gtest suite>"
            if not any(f".{entry['name']}." in name for name in failed_suites):
                failed += 1
                print(f"FAILED: {entry['name']} ended {entry['result']} without reporting a failed case")
    elif not junit.exists():
        print(f"no test results under {logs}", file=sys.stderr)
        failed += 1

    line = f"tests: {passed} passed, {failed} failed"
    if skipped:
        line += f", {skipped} skipped"
    print(line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "build"))
