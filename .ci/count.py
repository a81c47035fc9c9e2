"""Counts test cases over meson test logs: each doctest binary's own case
counts, and one case for every other test; prints "N passed, N failed".
--extra P F adds checks run outside meson (the fuzzers). A build directory
stands for its meson-logs/testlog.json; a .json file, for another meson test
log (a run with --logbase)."""
import json
import re
import sys

CASES = re.compile(r"\[doctest\] test cases:\s*(\d+) \|\s*(\d+) passed \|\s*(\d+) failed")

passed = failed = skipped = 0
builds = sys.argv[1:]
if builds[:1] == ["--extra"]:
    passed, failed = int(builds[1]), int(builds[2])
    builds = builds[3:]
for build in builds:
    try:
        path = build if build.endswith(".json") else f"{build}/meson-logs/testlog.json"
        with open(path, encoding="utf-8") as log:
            entries = [json.loads(line) for line in log if line.strip()]
    except OSError:
        failed += 1  # that build did not get as far as its tests
        continue
    for t in entries:
        result = t.get("result")
        m = CASES.search(t.get("stdout") or "")
        if m and result in ("OK", "FAIL"):
            passed += int(m.group(2))
            failed += int(m.group(3))
            if result == "FAIL" and int(m.group(3)) == 0:
                failed += 1  # crashed or timed out after its last case
        elif result == "SKIP":
            skipped += 1
        elif result in ("OK", "EXPECTEDFAIL"):
            passed += 1
        else:
            failed += 1

print(f"{passed} passed, {failed} failed, {skipped} skipped")
sys.exit(1 if failed else 0)
