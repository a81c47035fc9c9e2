#!/usr/bin/env python3
"""Write a pto-par commands file for a pytest suite: one line per test file.

    examples/pytest_cmds.py tests > tests.cmds
    pto-par -e CUDA_VISIBLE_DEVICES tests.cmds

The tests are collected by pytest itself (`pytest --collect-only -q`, with
this file loaded as a plugin that notes each test's file and marker), so
parametrised tests, classes, conftest.py and the suite's own configuration
count as they do in a real run. A file's line asks for the most devices any
of its tests needs: the value of `@pytest.mark.devices(N)` (function, class
or module `pytestmark`), else the count of the deepest `--folder DIR=N` that
holds the file, else 1. Its label is its path, so that `--history` and
`--rerun-failed` know it whatever lines are added or moved, and it writes its
JUnit report to `reports/{label}.xml`. A file pytest cannot collect is an
error, and nothing is written.

Python 3, standard library only; pytest is needed to collect, not to run
this file.
"""

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

# What the plugin (below) and the generator say to each other.
RECORDS_VARIABLE = "PTO_PAR_PYTEST_CMDS_RECORDS"
MARKER_VARIABLE = "PTO_PAR_PYTEST_CMDS_MARKER"
PROG = "pytest_cmds.py"


# --- the plugin: runs inside `pytest --collect-only`, loaded with -p ---------

def _write_records(records):
    with open(os.environ[RECORDS_VARIABLE], "a", encoding="utf-8") as out:
        for record in records:
            out.write(json.dumps(record) + "\n")


def pytest_collectreport(report):
    if RECORDS_VARIABLE in os.environ and report.failed:
        _write_records([{"error": report.nodeid or str(report.fspath)}])


def _record(item, name):
    # item.path is pytest 7's; item.fspath is older pytest's.
    path = str(getattr(item, "path", None) or item.fspath)
    record = {"path": os.path.abspath(path), "test": item.nodeid}
    marker = item.get_closest_marker(name)
    if marker is not None:
        args = marker.args
        if (len(args) == 1 and not marker.kwargs and type(args[0]) is int
                and args[0] >= 0):
            record["devices"] = args[0]
        else:
            words = [repr(a) for a in args]
            words += ["%s=%r" % kv for kv in sorted(marker.kwargs.items())]
            record["bad_marker"] = "%s(%s)" % (name, ", ".join(words))
    return record


def pytest_collection_finish(session):
    if RECORDS_VARIABLE in os.environ:
        name = os.environ[MARKER_VARIABLE]
        _write_records(_record(item, name) for item in session.items)


# --- the generator ------------------------------------------------------------

class Failure(Exception):
    """A reason to write no commands file, said as one message."""


def parse_folder(text):
    directory, sep, count = text.rpartition("=")
    if not sep or not directory or not re.fullmatch(r"[0-9]+", count):
        raise argparse.ArgumentTypeError(
            "expected DIR=N with N a whole number of devices, such as "
            "tests/distributed=2; got %r" % text)
    return os.path.relpath(directory), int(count)


def parse_arguments(argv):
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Write a pto-par commands file for a pytest suite, one "
                    "line per test file, on standard output.")
    parser.add_argument(
        "paths", nargs="*", metavar="PATH",
        help="what to collect, as pytest takes it (default: what pytest "
             "collects here)")
    parser.add_argument(
        "--pytest", default="pytest", metavar="COMMAND",
        help="how to run pytest, for collecting and in each line, with any "
             "options of your suite's (default: %(default)s)")
    parser.add_argument(
        "--marker", default="devices", metavar="NAME",
        help="the marker that says how many devices a test needs "
             "(default: %(default)s, as in @pytest.mark.devices(2))")
    parser.add_argument(
        "--folder", action="append", default=[], type=parse_folder,
        metavar="DIR=N",
        help="tests under DIR without a marker need N devices (repeatable; "
             "the deepest DIR wins)")
    parser.add_argument(
        "--junit-dir", default="reports", metavar="DIR",
        help="each line writes its JUnit report to DIR/{label}.xml "
             "(default: %(default)s; empty: none)")
    return parser.parse_args(argv)


def collect(pytest_command, paths, marker):
    """The plugin's records of `pytest --collect-only -q PATH...`."""
    here = os.path.dirname(os.path.abspath(__file__))
    plugin = os.path.splitext(os.path.basename(__file__))[0]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (here, env.get("PYTHONPATH")) if p)
    env[MARKER_VARIABLE] = marker
    with tempfile.TemporaryDirectory(prefix="pytest-cmds-") as tmp:
        env[RECORDS_VARIABLE] = os.path.join(tmp, "records")
        command = (shlex.split(pytest_command)
                   + ["--collect-only", "-q", "-p", plugin] + paths)
        try:
            done = subprocess.run(command, env=env, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT)
        except OSError as e:
            raise Failure("cannot run %s: %s" % (shlex.join(command[:1]),
                                                 e.strerror))
        output = done.stdout.decode("utf-8", "replace")
        try:
            with open(env[RECORDS_VARIABLE], encoding="utf-8") as f:
                records = [json.loads(line) for line in f]
        except FileNotFoundError:
            records = []
    said = "%s said:\n%s" % (shlex.join(command), output.rstrip())
    errors = [r["error"] for r in records if "error" in r]
    if errors:
        raise Failure("pytest could not collect %d file%s: %s\n%s" % (
            len(errors), "" if len(errors) == 1 else "s", ", ".join(errors),
            said))
    # 5 is pytest's "no tests collected".
    if done.returncode == 5:
        raise Failure("pytest collected no tests\n" + said)
    if done.returncode != 0 or not any("test" in r for r in records):
        raise Failure("collecting the tests failed (pytest exited %d)\n%s"
                      % (done.returncode, said))
    return records


def folder_devices(path, folders):
    """The count of the deepest folder rule that holds path, else None."""
    best = None
    for directory, count in folders:
        if directory == "." or path.startswith(directory + os.sep):
            if best is None or len(directory) > len(best[0]):
                best = (directory, count)
    return best and best[1]


def label_for(path, taken):
    """The path, made a safe pto-par label and unique among taken."""
    base = re.sub(r"[^A-Za-z0-9._+/-]", "_", path)
    label, n = base, 1
    while label in taken:
        n += 1
        label = "%s-%d" % (base, n)
    taken.add(label)
    return label


def commands_file(records, args):
    """The lines of the commands file, one per test file, in pytest's order."""
    files = {}  # relative path -> devices; dicts keep pytest's order
    bad = []
    for r in (r for r in records if "test" in r):
        path = os.path.relpath(r["path"])
        if path == os.pardir or path.startswith(os.pardir + os.sep):
            raise Failure("%s is outside the current directory: run %s from "
                          "the directory the jobs will run in" % (r["path"],
                                                                   PROG))
        if "bad_marker" in r:
            bad.append("%s: @pytest.mark.%s" % (r["test"], r["bad_marker"]))
            continue
        wanted = r.get("devices")
        if wanted is None:
            wanted = folder_devices(path, args.folder)
        files[path] = max(files.get(path, 0), 1 if wanted is None else wanted)
    if bad:
        raise Failure("a devices marker takes one whole number, as in "
                      "@pytest.mark.%s(2):\n  %s" % (args.marker,
                                                     "\n  ".join(bad)))
    lines = ["# %d test files, collected by: %s" % (
        len(files), shlex.join(shlex.split(args.pytest)
                               + ["--collect-only", "-q"] + args.paths))]
    taken = set()
    for path, devices in files.items():
        label = label_for(path, taken)
        words = [args.pytest, shlex.quote(path)]
        if args.junit_dir:
            words.append(shlex.quote("--junitxml=" + os.path.join(
                args.junit_dir, "")) + "{label}.xml")
        lines.append("@%d,label=%s %s" % (devices, label, " ".join(words)))
    return lines


def main(argv):
    args = parse_arguments(argv)
    try:
        lines = commands_file(collect(args.pytest, args.paths, args.marker),
                              args)
    except Failure as e:
        print("%s: error: %s" % (PROG, e), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    # A file name that is not UTF-8 is written back as the bytes it was.
    sys.stdout.flush()
    sys.stdout.buffer.write(
        ("\n".join(lines) + "\n").encode("utf-8", "surrogateescape"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
