#!/usr/bin/env python3
"""Prints `tests: N passed, N failed[, N skipped]` from meson test runs.

    test-summary.py [--since FILE] BUILD_DIR[:SUITE,SUITE...] ...

Counts real test cases, in every build dir given (scripts/test.sh passes the
main build and the sanitizer build with the suites it ran there). The tests
expected are the ones meson defines in those suites (all, when none are
named); each must have run in this run and reported cases:

- a GoogleTest executable's cases come from the XML it wrote
  (BUILD_DIR/<test>.xml), and only if that file was written after --since:
  a suite that crashed before writing it leaves an older one behind, and
  those are not this run's results;
- any other test (a fuzzer) is one case, its exit status;
- a test that did not run, or reported no cases, is a failure, and so is one
  meson saw fail (a crash, a timeout) without a failed case in its XML.

Exits non-zero if anything failed.
"""
import argparse
import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

PASSING = ("OK", "EXPECTEDFAIL")


def expected_tests(build_dir: Path, suites: list[str]) -> list[dict]:
    out = subprocess.run(["meson", "introspect", "--tests", str(build_dir)],
                         check=True, capture_output=True, text=True).stdout
    tests = json.loads(out)
    if not suites:
        return tests
    # meson names suites "<project>:<suite>"
    return [t for t in tests if any(s.split(":")[-1] in suites for s in t["suite"])]


def run_results(build_dir: Path, since: float) -> dict[str, str]:
    """meson's result per test name ("OK", "FAIL", "TIMEOUT"...) in this run."""
    log = build_dir / "meson-logs" / "testlog.json"
    if not log.exists() or log.stat().st_mtime < since:
        return {}
    results = {}
    for line in log.read_text().splitlines():
        entry = json.loads(line)
        # "sluice:unit / request" -> "request"
        results[entry["name"].split(" / ", 1)[-1]] = entry["result"]
    return results


def gtest_cases(xml: Path, since: float):
    """(passed, failed names, skipped) from a GoogleTest XML of this run, or None."""
    if not xml.exists() or xml.stat().st_mtime < since:
        return None
    passed, failed, skipped = 0, [], 0
    for case in ET.parse(xml).getroot().iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            failed.append(f"{case.get('classname')}.{case.get('name')}")
        elif case.find("skipped") is not None or case.get("result") == "skipped" or case.get("status") == "notrun":
            skipped += 1
        else:
            passed += 1
    return passed, failed, skipped


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--since", help="a file touched before the run: older results are not this run's")
    parser.add_argument("builds", nargs="*", default=["build"], metavar="BUILD_DIR[:SUITE,...]")
    args = parser.parse_args()
    since = Path(args.since).stat().st_mtime if args.since else 0.0

    passed = failed = skipped = 0
    for spec in args.builds:
        dir_name, _, suite_list = spec.partition(":")
        build_dir = Path(dir_name)
        suites = [s for s in suite_list.split(",") if s]
        results = run_results(build_dir, since)
        for test in expected_tests(build_dir, suites):
            name = test["name"]
            where = f"{dir_name}: {name}"
            result = results.get(name)
            if result is None:
                failed += 1
                print(f"FAILED: {where} did not run")
                continue
            if test["protocol"] != "gtest":
                if result in PASSING:
                    passed += 1
                elif result == "SKIP":
                    skipped += 1
                else:
                    failed += 1
                    print(f"FAILED: {where} ended {result}")
                continue
            cases = gtest_cases(build_dir / f"{name}.xml", since)
            if cases is None or sum((cases[0], len(cases[1]), cases[2])) == 0:
                failed += 1
                print(f"FAILED: {where} ended {result} and reported no test cases in this run")
                continue
            passed += cases[0]
            skipped += cases[2]
            failed += len(cases[1])
            for case in cases[1]:
                print(f"FAILED: {where} :: {case}")
            if result not in PASSING and not cases[1]:
                failed += 1
                print(f"FAILED: {where} ended {result} without reporting a failed case")

    line = f"tests: {passed} passed, {failed} failed"
    if skipped:
        line += f", {skipped} skipped"
    print(line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
