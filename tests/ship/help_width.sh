#!/bin/bash
# `pto-par --help` fits an 80-column terminal: no line is wider than 80
# columns (characters, in a UTF-8 locale), and none holds a tab, whose width
# depends on the terminal.
# Usage: help_width.sh PTO_PAR
set -u

if (($# != 1)); then
    echo "usage: $0 PTO_PAR" >&2
    exit 2
fi
help=$("$1" --help) || {
    echo "FAIL: '$1 --help' exited $?"
    exit 1
}

export LC_ALL=C.UTF-8
status=0
n=0
while IFS= read -r line; do
    n=$((n + 1))
    if [[ $line == *$'\t'* ]]; then
        echo "FAIL: line $n of --help holds a tab: $line"
        status=1
    elif ((${#line} > 80)); then
        echo "FAIL: line $n of --help is ${#line} columns wide: $line"
        status=1
    fi
done <<<"$help"
((status == 0)) && echo "ok: the $n lines of --help fit 80 columns"
exit $status
