#!/bin/bash
# examples/pytest_cmds.py, the README's way from a pytest suite to a commands
# file, on a small suite as real ones are laid out (nested folders, classes,
# parametrised tests, module and parameter markers, files without one, a
# name with a blank): the file it writes is the one expected, pto-par runs
# it with each test seeing as many devices as it asked for and writing its
# own JUnit report, and collection errors and bad markers are clear errors
# that write nothing. Skipped (77) where pytest is not installed.
# Usage: pytest_cmds.sh GENERATOR PTO_PAR
set -u

if (($# != 2)); then
    echo "usage: $0 GENERATOR PTO_PAR" >&2
    exit 2
fi
generator=$(realpath "$1") pto_par=$(realpath "$2")
if ! command -v pytest >/dev/null 2>&1 || ! command -v python3 >/dev/null 2>&1; then
    echo "pytest or python3 not found (Debian: python3-pytest); skipping"
    exit 77
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
status=0
fail() {
    echo "FAIL: $*"
    status=1
}

# Each test checks that it sees the devices it asked for, so the run below
# fails if a line asked for too few or the devices did not reach the test.
mkdir -p tests/ops tests/distributed/ring tests/models
cat >pytest.ini <<'EOF'
[pytest]
markers =
    devices(n): the test needs n accelerator devices
testpaths = tests
EOF
cat >tests/conftest.py <<'EOF'
import os
import pytest

@pytest.fixture
def visible():
    return [d for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d]
EOF
cat >tests/ops/test_add.py <<'EOF'
import pytest

@pytest.mark.parametrize("n", [1, 2, 3])
def test_add(n, visible):
    assert len(visible) == 1
EOF
cat >tests/ops/test_lint.py <<'EOF'
import pytest
pytestmark = pytest.mark.devices(0)

def test_style(visible):
    assert visible == []
EOF
cat >tests/ops/helpers.py <<'EOF'
def not_a_test():
    pass
EOF
cat >tests/distributed/test_p2p.py <<'EOF'
def test_send(visible):
    assert len(visible) == 2
EOF
cat >tests/distributed/test_docs.py <<'EOF'
import pytest
pytestmark = pytest.mark.devices(0)

def test_docs(visible):
    assert visible == []
EOF
cat >tests/distributed/ring/test_allreduce.py <<'EOF'
import pytest

class TestRing:
    @pytest.mark.devices(4)
    @pytest.mark.parametrize("size", [8, 1024])
    def test_big(self, size, visible):
        assert len(visible) == 4

    def test_small(self, visible):
        assert len(visible) >= 3
EOF
cat >tests/distributed/ring/test_ring.py <<'EOF'
def test_ring(visible):
    assert len(visible) == 3
EOF
cat >"tests/models/test_odd name.py" <<'EOF'
import pytest

@pytest.mark.parametrize("x", [pytest.param(1, marks=pytest.mark.devices(3)), 2])
def test_x(x, visible):
    assert len(visible) == 3
EOF

# The deepest folder rule wins over a shallower one; a marker wins over both.
folders=(--folder tests/distributed=2 --folder tests/distributed/ring=3)
if ! python3 "$generator" "${folders[@]}" >tests.cmds 2>gen.err; then
    fail "the generator failed on a suite that collects:"
    cat gen.err
fi
cat >expected.cmds <<'EOF'
# 7 test files, collected by: pytest --collect-only -q
@0,label=tests/distributed/test_docs.py pytest tests/distributed/test_docs.py --junitxml=reports/{label}.xml
@2,label=tests/distributed/test_p2p.py pytest tests/distributed/test_p2p.py --junitxml=reports/{label}.xml
@4,label=tests/distributed/ring/test_allreduce.py pytest tests/distributed/ring/test_allreduce.py --junitxml=reports/{label}.xml
@3,label=tests/distributed/ring/test_ring.py pytest tests/distributed/ring/test_ring.py --junitxml=reports/{label}.xml
@3,label=tests/models/test_odd_name.py pytest 'tests/models/test_odd name.py' --junitxml=reports/{label}.xml
@1,label=tests/ops/test_add.py pytest tests/ops/test_add.py --junitxml=reports/{label}.xml
@0,label=tests/ops/test_lint.py pytest tests/ops/test_lint.py --junitxml=reports/{label}.xml
EOF
if ! diff -u expected.cmds tests.cmds; then
    fail "the commands file is not the one expected (diff above)"
fi

if ! "$pto_par" -q -d 0-3 -e CUDA_VISIBLE_DEVICES --output failed tests.cmds >run.out 2>&1; then
    fail "pto-par did not pass the generated file:"
    cat run.out
fi
for label in tests/distributed/test_docs.py tests/distributed/test_p2p.py \
    tests/distributed/ring/test_allreduce.py tests/distributed/ring/test_ring.py \
    tests/models/test_odd_name.py tests/ops/test_add.py tests/ops/test_lint.py; do
    if ! grep -q 'failures="0"' "reports/$label.xml" 2>/dev/null; then
        fail "no passing JUnit report reports/$label.xml"
    fi
done

# Labels are paths: a new file changes no other line, so history still
# knows every job it knew.
cat >tests/ops/test_mul.py <<'EOF'
def test_mul(visible):
    assert len(visible) == 1
EOF
python3 "$generator" "${folders[@]}" >again.cmds 2>/dev/null
if [[ -n $(LC_ALL=C comm -23 <(tail -n +2 tests.cmds | LC_ALL=C sort) \
    <(tail -n +2 again.cmds | LC_ALL=C sort)) ]]; then
    fail "adding a test file changed other lines:"
    diff tests.cmds again.cmds
fi
grep -qxF '@1,label=tests/ops/test_mul.py pytest tests/ops/test_mul.py --junitxml=reports/{label}.xml' again.cmds ||
    fail "the new file has no line of its own"

# A folder given as an absolute path, with a slash at its end, is the same
# folder.
python3 "$generator" --folder "$work/tests/distributed/=2" --folder tests/distributed/ring=3 \
    >absolute.cmds 2>/dev/null
if [[ -n $(LC_ALL=C comm -3 <(tail -n +2 again.cmds | LC_ALL=C sort) \
    <(tail -n +2 absolute.cmds | LC_ALL=C sort)) ]]; then
    fail "an absolute --folder gave other lines:"
    diff again.cmds absolute.cmds
fi

# A file name that is not UTF-8 comes out as its bytes, even where standard
# output is strict UTF-8, under a label of its own.
printf 'def test_bytes():\n    pass\n' >"tests/ops/test_$(printf '\377').py"
if ! PYTHONIOENCODING=utf-8:strict python3 "$generator" >bytes.cmds 2>bytes.err; then
    fail "a file name that is not UTF-8 made the generator fail:"
    cat bytes.err
elif ! grep -qF "@1,label=tests/ops/test__.py pytest 'tests/ops/test_$(printf '\377').py'" bytes.cmds; then
    fail "a file name that is not UTF-8 does not come out as its bytes:"
    cat -v bytes.cmds
fi
rm "tests/ops/test_$(printf '\377').py"

# expect_error NAME PATTERN ARG...: the generator fails, says PATTERN on
# standard error and writes nothing on standard output.
expect_error() {
    local name=$1 pattern=$2 rc
    shift 2
    python3 "$generator" "$@" >err.cmds 2>err.txt
    rc=$?
    if ((rc == 0)); then
        fail "$name: the generator exited 0"
    elif [[ -s err.cmds ]]; then
        fail "$name: the generator wrote a commands file anyway"
    elif ! head -n 1 err.txt | grep -qE -- "$pattern"; then
        fail "$name: its first line does not match '$pattern':"
        cat err.txt
    fi
}

printf 'import no_such_module\n\ndef test_a():\n    pass\n' >tests/ops/test_broken.py
printf 'def test_b(:\n' >tests/models/test_syntax.py
expect_error "collection errors" \
    '^pytest_cmds\.py: error: pytest could not collect 2 files: tests/models/test_syntax\.py, tests/ops/test_broken\.py$'
grep -q 'No module named .no_such_module' err.txt ||
    fail "collection errors: pytest's own report of them is not shown"
rm tests/ops/test_broken.py tests/models/test_syntax.py

cat >tests/ops/test_badmark.py <<'EOF'
import pytest

@pytest.mark.devices("two")
def test_a():
    pass
EOF
expect_error "a marker without a number" '^pytest_cmds\.py: error: a devices marker takes one whole number'
grep -qF "tests/ops/test_badmark.py::test_a: @pytest.mark.devices('two')" err.txt ||
    fail "a marker without a number: the test is not named"
rm tests/ops/test_badmark.py

expect_error "a path that does not exist" 'pytest exited 4' no_such_dir
expect_error "no tests" 'pytest collected no tests' tests/ops/helpers.py
expect_error "no pytest" '^pytest_cmds\.py: error: cannot run /no/such/pytest' --pytest /no/such/pytest
(
    cd tests/ops || exit 1
    expect_error "tests outside the directory" 'is outside the current directory' ../distributed
    exit $status
) || status=1

((status == 0)) && echo "ok: examples/pytest_cmds.py writes the expected file, pto-par runs it, errors are clear"
exit $status
