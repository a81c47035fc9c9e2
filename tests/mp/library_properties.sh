#!/bin/bash
# libptomp keeps the control-flow protection of a program built with
# -fcf-protection=full: every object of the library is marked IBT, so a
# relocatable link of the program's object with the whole library still
# claims IBT. It never claims SHSTK, which the assembly switch does not
# follow (libptopar(3), "Context switches").
# Usage: library_properties.sh LIBRARY READELF CXX [CXX ARGS...]
set -u

if (($# < 3)); then
    echo "usage: $0 LIBRARY READELF CXX [CXX ARGS...]" >&2
    exit 2
fi
library=$1 readelf=$2
shift 2

dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
echo 'int main() { return 0; }' >"$dir/main.cpp"
if ! "$@" -fcf-protection=full -c "$dir/main.cpp" -o "$dir/main.o"; then
    echo "this compiler has no -fcf-protection; nothing to check"
    exit 77
fi
if [[ $("$readelf" -n "$dir/main.o") != *IBT* ]]; then
    echo "this compiler does not mark objects for -fcf-protection; nothing to compare"
    exit 77
fi
case $library in
*.a) whole=(-Wl,--whole-archive "$library" -Wl,--no-whole-archive) ;;
*) whole=("$library") ;;
esac
status=0
# Each member of an archive, or the shared library itself.
unmarked=$("$readelf" -n "$library" | awk '
    /^File: / { if (file != "" && !ibt) print file; file = $2; ibt = 0 }
    /x86 feature: .*IBT/ { ibt = 1 }
    END { if (file == "") file = "(the library)"; if (!ibt) print file }')
if [[ -n $unmarked ]]; then
    echo "FAIL: not marked IBT: $unmarked"
    status=1
fi
if [[ $library == *.a ]]; then
    if ! "$@" -r -nostdlib "$dir/main.o" "${whole[@]}" -o "$dir/linked.o"; then
        echo "FAIL: cannot link the library relocatably"
        exit 1
    fi
    notes=$("$readelf" -n "$dir/linked.o")
    printf 'program with the whole library:\n%s\n' "$notes"
    if [[ $notes != *"x86 feature: IBT"* ]]; then
        echo "FAIL: linking the library takes IBT from the program"
        status=1
    fi
    if [[ $notes == *SHSTK* ]]; then
        echo "FAIL: the linked program claims SHSTK"
        status=1
    fi
fi
exit $status
