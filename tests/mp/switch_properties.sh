#!/bin/bash
# The assembly switch never claims shadow-stack (SHSTK) compatibility, which
# it does not have, even when assembled with the flags of a distribution that
# turns CET on everywhere; it does claim what it has (IBT; BTI and PAC on
# aarch64). A C file built the same way shows the flags do mark objects.
# With KEEPS_SHSTK=1 in the environment it checks the other way round, for
# an object that keeps the shadow stack intact (runner/clone_vfork_*.S):
# it must claim SHSTK too.
# Usage: switch_properties.sh CPU_FAMILY SOURCE.S READELF CC [CC ARGS...]
set -u

if (($# < 4)); then
    echo "usage: $0 CPU_FAMILY SOURCE.S READELF CC [CC ARGS...]" >&2
    exit 2
fi
cpu=$1 source=$2 readelf=$3
shift 3
case $cpu in
x86_64)
    flags=(-fcf-protection=full) must=IBT must_not=SHSTK
    [[ ${KEEPS_SHSTK:-} == 1 ]] && must="IBT, SHSTK" must_not=""
    ;;
aarch64) flags=(-mbranch-protection=standard) must="BTI, PAC" must_not=SHSTK ;;
*)
    echo "no assembly switch for $cpu; nothing to check"
    exit 77
    ;;
esac

dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
echo 'void f(void) {}' >"$dir/f.c"
if ! "$@" "${flags[@]}" -c "$dir/f.c" -o "$dir/f.o" || ! "$@" "${flags[@]}" -c "$source" -o "$dir/switch.o"; then
    echo "FAIL: cannot build with ${flags[*]}"
    exit 1
fi
c_notes=$("$readelf" -n "$dir/f.o")
notes=$("$readelf" -n "$dir/switch.o")
printf 'C file:\n%s\nswitch:\n%s\n' "$c_notes" "$notes"
if [[ $c_notes != *"$must"* ]]; then
    echo "this compiler does not mark objects for ${flags[*]}; nothing to compare"
    exit 77
fi
status=0
if [[ -n $must_not && $notes == *"$must_not"* ]]; then
    echo "FAIL: the object claims $must_not"
    status=1
fi
if [[ $notes != *"$must"* ]]; then
    echo "FAIL: the object does not claim $must"
    status=1
fi
((status == 0)) && echo "ok: the object claims $must${must_not:+ and not $must_not}"
exit $status
