#!/usr/bin/env python3
"""Prints `tests: N passed, N failed[, N skipped]` from meson test runs.

    test-summary.py [--since FILE] [--skips-fail] BUILD_DIR{:|=}SUITE,SUITE... ...

Counts real test cases, in every build dir given (scripts/test.sh passes the
main build and the sanitizer build with the suites it ran in each). What it
expects is fixed by the caller, not read from what the configuration
happened to define, so a run cannot pass by having less to run:

- every suite named must be defined in its build dir: a suite the
  configuration dropped (man pages without go-md2man, the bench, DPDK) fails;
  with `=` (the main build) those must also be all the suites it defines, so
  a new suite is added to the list, and run, or fails;
- every test of those suites must have run in this run and reported cases;
  a GoogleTest executable's cases come from the XML it wrote
  (BUILD_DIR/<test>.xml), and only if that file was written after --since:
  a suite that crashed before writing it leaves an older one behind, and
  those are not this run's results;
- a GoogleTest executable must report as many cases as its
  `--gtest_list_tests` lists: a filter or an early exit that leaves cases
  out fails;
- any other test (a fuzzer) is one case, its exit status;
- a test meson saw fail (a crash, a timeout) without a failed case in its XML
  is a failure;
- with --skips-fail (SLUICE_REQUIRE_PRIVILEGED), a skipped case is a failure.

Exits non-zero if anything failed.
"""
import argparse
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

PASSING = ("OK", "EXPECTEDFAIL")


def defined_tests(build_dir: Path) -> list[dict]:
    out = subprocess.run(["meson", "introspect", "--tests", str(build_dir)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def suites_of(test: dict) -> set[str]:
    # meson names suites "<project>:<suite>"
    return {s.split(":")[-1] for s in test["suite"]}


def listed_cases(test: dict) -> int | None:
    """How many cases the executable lists, or None if it cannot list them."""
    env = dict(os.environ, **test.get("env", {}))
    env.pop("GTEST_FILTER", None)
    done = subprocess.run([*test["cmd"], "--gtest_list_tests"], capture_output=True, text=True,
                          env=env, cwd=test.get("workdir") or None, check=False)
    if done.returncode != 0:
        return None
    # Suites start in column 0, their cases are indented.
    return sum(1 for line in done.stdout.splitlines() if line.startswith("  ") and line.strip())


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
    """(passed, failed names, skipped names) from a GoogleTest XML of this run, or None."""
    if not xml.exists() or xml.stat().st_mtime < since:
        return None
    passed, failed, skipped = 0, [], []
    for case in ET.parse(xml).getroot().iter("testcase"):
        name = f"{case.get('classname')}.{case.get('name')}"
        if case.find("failure") is not None or case.find("error") is not None:
            failed.append(name)
        elif case.find("skipped") is not None or case.get("result") == "skipped" or case.get("status") == "notrun":
            skipped.append(name)
        else:
            passed += 1
    return passed, failed, skipped


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--since", help="a file touched before the run: older results are not this run's")
    parser.add_argument("--skips-fail", action="store_true", help="count a skipped case as a failure")
    parser.add_argument("builds", nargs="+", metavar="BUILD_DIR{:|=}SUITE,...")
    args = parser.parse_args()
    since = Path(args.since).stat().st_mtime if args.since else 0.0

    passed = failed = skipped = 0

    def fail(message: str) -> None:
        nonlocal failed
        failed += 1
        print(f"FAILED: {message}")

    for spec in args.builds:
        separator = min((i for i in (spec.find(":"), spec.find("=")) if i >= 0), default=-1)
        if separator < 0:
            parser.error(f"{spec}: name the suites expected, BUILD_DIR:SUITE,... or BUILD_DIR=SUITE,...")
        dir_name, exact, suite_list = spec[:separator], spec[separator] == "=", spec[separator + 1:]
        build_dir = Path(dir_name)
        suites = [s for s in suite_list.split(",") if s]
        tests = defined_tests(build_dir)
        defined = set().union(*(suites_of(t) for t in tests)) if tests else set()
        for suite in suites:
            if suite not in defined:
                fail(f"{dir_name}: suite {suite} is not defined (did the configuration leave it out?)")
        for suite in sorted(defined - set(suites)) if exact else []:
            fail(f"{dir_name}: suite {suite} is defined but not expected: add it to scripts/test.sh")
        results = run_results(build_dir, since)
        for test in (t for t in tests if suites_of(t) & set(suites)):
            name = test["name"]
            where = f"{dir_name}: {name}"
            result = results.get(name)
            if result is None:
                fail(f"{where} did not run")
                continue
            if test["protocol"] != "gtest":
                if result in PASSING:
                    passed += 1
                elif result == "SKIP" and not args.skips_fail:
                    skipped += 1
                else:
                    fail(f"{where} ended {result}")
                continue
            cases = gtest_cases(build_dir / f"{name}.xml", since)
            if cases is None or sum((cases[0], len(cases[1]), len(cases[2]))) == 0:
                fail(f"{where} ended {result} and reported no test cases in this run")
                continue
            case_passed, case_failed, case_skipped = cases
            passed += case_passed
            failed += len(case_failed)
            for case in case_failed:
                print(f"FAILED: {where} :: {case}")
            if args.skips_fail:
                for case in case_skipped:
                    fail(f"{where} :: {case} skipped (SLUICE_REQUIRE_PRIVILEGED: every case must run)")
            else:
                skipped += len(case_skipped)
            if result not in PASSING and not case_failed:
                fail(f"{where} ended {result} without reporting a failed case")
            reported = case_passed + len(case_failed) + len(case_skipped)
            listed = listed_cases(test)
            if listed is None:
                fail(f"{where}: --gtest_list_tests failed, so its {reported} reported cases cannot be checked")
            elif listed != reported:
                fail(f"{where} reported {reported} cases of the {listed} it lists")

    line = f"tests: {passed} passed, {failed} failed"
    if skipped:
        line += f", {skipped} skipped"
    print(line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
