#!/bin/bash
# libptomp stands alone: installed, `pkg-config --cflags --libs ptomp` is
# enough to build and run a program that spawns ranks, with no other part of
# pto-par on the link line.
# Usage: ptomp_install.sh MESON BUILD_DIR PREFIX LIBDIR
set -u

if (($# != 4)); then
    echo "usage: $0 MESON BUILD_DIR PREFIX LIBDIR" >&2
    exit 2
fi
meson=$1 build=$2 prefix=$3 libdir=$4
if [[ -z $meson ]] || ! command -v pkg-config >/dev/null 2>&1; then
    echo "meson or pkg-config not found; skipping the check of ptomp.pc"
    exit 77
fi

# shellcheck source=../support/staged_install.sh
source "$(dirname "$0")/../support/staged_install.sh"
libdir=$(under_prefix "$libdir")
stage_install
use_staged_pkgconfig "$libdir"
if ! flags=$(pkg-config --cflags --libs ptomp); then
    echo "FAIL: no usable ptomp.pc"
    exit 1
fi
echo "pkg-config --cflags --libs ptomp: $flags"
if [[ $flags == *ptopar* ]]; then
    echo "FAIL: ptomp.pc links libptopar"
    exit 1
fi
cat >"$dest/ranks.cpp" <<'CPP'
#include <pto/mp.hpp>

#include <cstdio>
#include <span>

int main()
{
    int total = 0;
    pto::mp::spawn([&](int rank) {
        int v[1] = {rank};
        pto::mp::all_reduce(std::span(v));
        if (rank == 0) total = v[0];
    }, 4, {.stack_bytes = 64 * 1024});
    std::printf("%d\n", total);
    return total == 6 ? 0 : 1;
}
CPP
# shellcheck disable=SC2086 # the flags are words; SHIP_CXXFLAGS: the sanitizers of this build
if ! "${CXX:-c++}" -std=c++20 ${SHIP_CXXFLAGS:-} -o "$dest/ranks" "$dest/ranks.cpp" $flags; then
    echo "FAIL: a program using pto::mp does not build against ptomp alone"
    exit 1
fi
if ! "$dest/ranks"; then
    echo "FAIL: that program does not run correctly"
    exit 1
fi
echo "ok: libptomp builds and runs on its own"
