#!/bin/bash
# The option list of pto-par(1) and `pto-par --help` name the same options:
# every option of --help has an entry in the page's list of options, every
# option in that list is in --help, and the list is in alphabetical order
# of the long names, as the page promises.
# Usage: options_sync.sh PTO_PAR PAGE
set -u

if (($# != 2)); then
    echo "usage: $0 PTO_PAR PAGE" >&2
    exit 2
fi
pto_par=$1
page=$2

help=$("$pto_par" --help) || {
    echo "FAIL: '$pto_par --help' exited $?"
    exit 1
}

# Option lines of --help: "  -d, --devices SPEC ..." or "      --device SPEC".
help_opts=$(printf '%s\n' "$help" |
    grep -oE '^ +(-[A-Za-z], )?--[a-z][a-z0-9-]*' |
    grep -oE -- '-{1,2}[A-Za-z][a-z0-9-]*' | LC_ALL=C sort -u)

# The items of the first list after "The options are as follows:", nested
# lists (the values of --output, the members of --json) left out. Each item
# line is one option with its aliases: ".It Fl d Ar spec , Fl -devices ...".
items=$(awk '
    /^The options are as follows:/ { armed = 1; next }
    armed && depth == 0 && /^\.Bl/ { depth = 1; next }
    depth == 0 { next }
    /^\.Bl/ { depth++; next }
    /^\.El/ { if (--depth == 0) exit; next }
    depth == 1 && /^\.It/ { print }
' "$page")
if [[ -z $items ]]; then
    echo "FAIL: no option list found in $page (after 'The options are as follows:')"
    exit 1
fi
page_opts=$(printf '%s\n' "$items" |
    grep -oE 'Fl +-?[A-Za-z][A-Za-z0-9-]*' | sed -E 's/^Fl +/-/' | LC_ALL=C sort -u)

status=0
missing=$(LC_ALL=C comm -23 <(printf '%s\n' "$help_opts") <(printf '%s\n' "$page_opts"))
extra=$(LC_ALL=C comm -13 <(printf '%s\n' "$help_opts") <(printf '%s\n' "$page_opts"))
if [[ -n $missing ]]; then
    echo "FAIL: in --help but not in the option list of $page: $(tr '\n' ' ' <<<"$missing")"
    status=1
fi
if [[ -n $extra ]]; then
    echo "FAIL: in the option list of $page but not in --help: $(tr '\n' ' ' <<<"$extra")"
    status=1
fi

# Alphabetical by the first long name of each item (the short name if it
# has none), in the C locale.
keys=$(printf '%s\n' "$items" | while read -r line; do
    long=$(grep -oE 'Fl +-[a-z][a-z0-9-]*' <<<"$line" | head -n1 | sed -E 's/^Fl +-//')
    if [[ -z $long ]]; then
        long=$(grep -oE 'Fl +[A-Za-z]' <<<"$line" | head -n1 | sed -E 's/^Fl +//')
    fi
    printf '%s\n' "$long"
done)
if ! LC_ALL=C sort -c <<<"$keys" 2>/dev/null; then
    echo "FAIL: the option list of $page is not in alphabetical order: $(tr '\n' ' ' <<<"$keys")"
    status=1
fi

if ((status == 0)); then
    echo "ok: $(wc -w <<<"$help_opts") options in --help and in $page: $(tr '\n' ' ' <<<"$help_opts")"
fi
exit $status
