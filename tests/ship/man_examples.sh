#!/bin/bash
# The programs in the EXAMPLES of libptopar(3) are complete: each builds with
# the command the page gives, against an installed copy of the library, and
# prints what the page says it prints.
# Usage: man_examples.sh MESON BUILD_DIR PREFIX LIBDIR MANDIR
set -u

if (($# != 5)); then
    echo "usage: $0 MESON BUILD_DIR PREFIX LIBDIR MANDIR" >&2
    exit 2
fi
meson=$1 build=$2 prefix=$3
if [[ -z $meson ]]; then
    echo "meson not found; skipping the check of the examples"
    exit 77
fi
if ! command -v pkg-config >/dev/null 2>&1; then
    echo "pkg-config not found; skipping the check of the examples"
    exit 77
fi

# shellcheck source=../support/staged_install.sh
source "$(dirname "$0")/../support/staged_install.sh"
libdir=$(under_prefix "$4") mandir=$(under_prefix "$5")
page=$mandir/man3/libptopar.3
stage_install
use_staged_pkgconfig "$libdir"

# Each literal display that holds a main() is a program; it is named by its
# first line, "// NAME.cpp: ...". The roff escapes used in code are \e (a
# backslash) and \& (nothing).
mkdir "$dest/ex"
awk -v dir="$dest/ex" '
    /^\.Bd -literal/ { inside = 1; n = 0; next }
    inside && /^\.Ed/ {
        inside = 0
        if (!is_program) next
        name = lines[1]
        sub(/^\/\/ */, "", name); sub(/:.*/, "", name)
        for (i = 1; i <= n; i++) print lines[i] > (dir "/" name)
        close(dir "/" name)
        is_program = 0
        next
    }
    inside {
        line = $0
        gsub(/\\&/, "", line)
        gsub(/\\e/, "\\", line)
        lines[++n] = line
        if (line ~ /^int main\(/) is_program = 1
    }
' "$page"

# What the page says the last program prints: the display after "It prints".
awk '
    /^It prints/ { armed = 1; next }
    armed && /^\.Bd -literal/ { inside = 1; next }
    inside && /^\.Ed/ { exit }
    inside { print }
' "$page" >"$dest/ranks.expected"

status=0
programs=("$dest"/ex/*.cpp)
if [[ ! -e ${programs[0]} ]]; then
    echo "FAIL: no example program found in $page"
    exit 1
fi
for src in "${programs[@]}"; do
    name=$(basename "$src" .cpp)
    # The page's command, c++ -std=c++20 -o prog prog.cpp $(pkg-config ...),
    # plus SHIP_CXXFLAGS: the sanitizers of this build, when it has any.
    # shellcheck disable=SC2046,SC2086 # the flags are words
    if ! "${CXX:-c++}" -std=c++20 ${SHIP_CXXFLAGS:-} -o "$dest/ex/$name" "$src" $(pkg-config --cflags --libs ptopar); then
        echo "FAIL: the example $name.cpp does not build"
        status=1
        continue
    fi
    echo "built $name.cpp"
done

run() { # run NAME EXPECTED_STATUS EXPECTED_OUTPUT ARG...
    local name=$1 want_status=$2 want_out=$3 out got_status
    shift 3
    [[ -x $dest/ex/$name ]] || return
    out=$("$dest/ex/$name" "$@" 2>&1)
    got_status=$?
    if ((got_status != want_status)); then
        echo "FAIL: $name $* exited $got_status, not $want_status; it printed:"
        printf '%s\n' "$out"
        status=1
    elif [[ -n $want_out && $out != "$want_out" ]]; then
        echo "FAIL: $name $* printed:"
        printf '%s\n' "$out"
        echo "where the page says:"
        printf '%s\n' "$want_out"
        status=1
    else
        echo "ran $name $*"
    fi
}
run ranges 0 "4 devices: 0-3, one by one 0,1,2,3" ' 3, 0-2,,2'
run ranges 2 "invalid device range '3-1': the first id is greater than the last" 3-1
run suite 1 ""
if [[ -x $dest/ex/suite ]] && ! "$dest/ex/suite" | grep -qx '1 of 4 jobs did not pass'; then
    echo "FAIL: suite did not report its one broken job"
    status=1
fi
run ranks 0 "$(cat "$dest/ranks.expected")"

for src in "${programs[@]}"; do
    case $(basename "$src" .cpp) in
    ranges | suite | ranks) ;;
    *) echo "note: $(basename "$src") was built but has no expected output here" ;;
    esac
done

((status == 0)) && echo "ok: the examples of libptopar(3) build and do what the page says"
exit $status
