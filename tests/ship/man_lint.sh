#!/bin/bash
# Every manual page passes `mandoc -Tlint -Wwarning`: no warnings, no errors
# (style notes, such as a cross-reference to a page this machine lacks, are
# allowed). Skipped (77) where mandoc is not installed.
# Usage: man_lint.sh PAGE...
set -u

if ! command -v mandoc >/dev/null 2>&1; then
    echo "mandoc not found; skipping the lint of the manual pages"
    exit 77
fi
if (($# == 0)); then
    echo "usage: $0 PAGE..." >&2
    exit 2
fi

status=0
for page in "$@"; do
    # mandoc also complains about its own out-of-date database on stderr;
    # only the lines about the page itself matter.
    if ! report=$(mandoc -Tlint -Wwarning "$page" 2>&1); then
        echo "FAIL $page:"
        printf '%s\n' "$report" | grep -F -- "$page"
        status=1
    else
        echo "ok   $page"
    fi
done
exit $status
