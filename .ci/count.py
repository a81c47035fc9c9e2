"""Counts test cases over meson test logs: each doctest binary's own case
counts, and one case for every other test; prints "N passed, N failed".
--extra P F adds checks run outside meson (the fuzzers). A build directory
stands for its meson-logs/testlog.json; a .json file, for another meson test
log (a run with --logbase). Before that line it names each failed test, and
in a doctest binary each failed case with its first error, for CI's tail is
all a reader of a remote run may see."""
import json
import re
import sys

CASES = re.compile(r"\[doctest\] test cases:\s*(\d+) \|\s*(\d+) passed \|\s*(\d+) failed")
# doctest's console reporter heads only a failed case's report with this.
FAILED_CASE = re.compile(r"^TEST CASE:\s*(.*)$", re.M)
ERROR = re.compile(r"^.*: (?:ERROR|FATAL ERROR): .*$", re.M)


def failure(build, t):
    """A line or two naming what failed, at most 300 characters each."""
    out = t.get("stdout") or ""
    lines = [f"FAILED {build}: {t.get('name')} ({t.get('result')})"]
    for case in FAILED_CASE.finditer(out):
        err = ERROR.search(out, case.end())
        lines.append(f"  case {case.group(1).strip()}"[:300])
        if err:
            lines.append(f"    {err.group(0).strip()}"[:300])
    if len(lines) == 1:  # not a doctest report: its last words, then
        tail = [line for line in out.splitlines() if line.strip()][-3:]
        lines.extend(f"    {line.strip()}"[:300] for line in tail)
    return lines[:12]


passed = failed = skipped = 0
report = []
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
        report.append(f"FAILED {build}: no test log")
        continue
    for t in entries:
        result = t.get("result")
        m = CASES.search(t.get("stdout") or "")
        if result not in ("OK", "EXPECTEDFAIL", "SKIP"):
            report.extend(failure(build, t))
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

for line in report:
    print(line)
print(f"{passed} passed, {failed} failed, {skipped} skipped")
sys.exit(1 if failed else 0)
