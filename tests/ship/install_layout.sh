#!/bin/bash
# `meson install --destdir` lays out everything a user and a packager expect:
# the command, the static library, every public header, ptopar.pc, the three
# manual pages and the bash and zsh completions; and the installed .pc is
# enough to build a program that uses every public header.
# Usage: install_layout.sh MESON BUILD_DIR SOURCE_INCLUDE_DIR PREFIX BINDIR
#        LIBDIR INCLUDEDIR MANDIR DATADIR
set -u

if (($# != 9)); then
    echo "usage: $0 MESON BUILD_DIR SOURCE_INCLUDE_DIR PREFIX BINDIR LIBDIR INCLUDEDIR MANDIR DATADIR" >&2
    exit 2
fi
meson=$1 build=$2 src_include=$3 prefix=$4
if [[ -z $meson ]]; then
    echo "meson not found; skipping the install check"
    exit 77
fi

# shellcheck source=../support/staged_install.sh
source "$(dirname "$0")/../support/staged_install.sh"
bindir=$(under_prefix "$5") libdir=$(under_prefix "$6") includedir=$(under_prefix "$7")
mandir=$(under_prefix "$8") datadir=$(under_prefix "$9")
stage_install

status=0
want() { # want TEST PATH
    if ! test "$1" "$2"; then
        echo "FAIL: missing ${2#"$dest"}"
        status=1
    fi
}
want -x "$bindir/pto-par"
want -f "$libdir/libptopar.a"
want -f "$libdir/pkgconfig/ptopar.pc"
# Every header of the source's include/pto/ is public.
for header in "$src_include"/pto/*.hpp; do
    want -f "$includedir/pto/${header##*/}"
done
for header in devices.hpp error.hpp job_output.hpp mp.hpp scheduler.hpp; do
    want -f "$includedir/pto/$header"
done
want -f "$mandir/man1/pto-par.1"
want -f "$mandir/man5/pto-par.cmds.5"
want -f "$mandir/man3/libptopar.3"
want -f "$datadir/bash-completion/completions/pto-par"
want -f "$datadir/zsh/site-functions/_pto-par"

echo "installed under $prefix:"
(cd "$dest$prefix" && find . -type f | LC_ALL=C sort | sed 's|^\./|  |')

if ((status == 0)) && "$bindir/pto-par" --version >/dev/null; then
    :
else
    ((status == 0)) && echo "FAIL: the installed pto-par --version failed"
    status=1
fi

# The .pc file, read from the DESTDIR as if it were the root.
if ((status == 0)) && command -v pkg-config >/dev/null 2>&1; then
    use_staged_pkgconfig "$libdir"
    if [[ -n $(pkg-config --print-requires ptopar) ]]; then
        echo "FAIL: ptopar.pc requires other packages: $(pkg-config --print-requires ptopar)"
        status=1
    fi
    flags=$(pkg-config --cflags --libs ptopar) || status=1
    echo "pkg-config --cflags --libs ptopar: $flags"
    cat >"$dest/uses_all.cpp" <<'CPP'
#include <pto/devices.hpp>
#include <pto/error.hpp>
#include <pto/job_output.hpp>
#include <pto/mp.hpp>
#include <pto/scheduler.hpp>

int main()
{
    const int ids[] = {0, 1, 2, 3};
    int rank_sum = 0;
    pto::mp::spawn([&](int rank) { rank_sum += rank; }, 3);
    return pto::format_device_range(ids) == "0-3" && rank_sum == 3 ? 0 : 1;
}
CPP
    # shellcheck disable=SC2086 # the flags are words; SHIP_CXXFLAGS: see meson.build
    if ! "${CXX:-c++}" -std=c++20 ${SHIP_CXXFLAGS:-} -o "$dest/uses_all" "$dest/uses_all.cpp" $flags; then
        echo "FAIL: a program using every public header does not build against the installed files"
        status=1
    elif ! "$dest/uses_all"; then
        echo "FAIL: that program does not run correctly"
        status=1
    fi
fi

((status == 0)) && echo "ok: the install lays out every file"
exit $status
