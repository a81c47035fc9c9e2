#!/bin/bash
# The bash and zsh completions offer exactly the options of `pto-par --help`,
# and the bash one completes the values it promises: --output modes, -j auto,
# -d none/auto, files for FILE, directories for --log-dir, nothing after FILE.
# Usage: completions.sh PTO_PAR BASH_COMPLETION ZSH_COMPLETION
set -u

if (($# != 3)); then
    echo "usage: $0 PTO_PAR BASH_COMPLETION ZSH_COMPLETION" >&2
    exit 2
fi
pto_par=$1
bash_file=$2
zsh_file=$3
status=0
fail() {
    echo "FAIL: $*"
    status=1
}
# The lines that are in only one of two sorted lists, on one line.
words_of_diff() {
    LC_ALL=C comm -3 <(printf '%s\n' "$1") <(printf '%s\n' "$2") | tr -d '\t' | tr '\n' ' '
}

help=$("$pto_par" --help) || {
    echo "FAIL: '$pto_par --help' exited $?"
    exit 1
}
help_opts=$(printf '%s\n' "$help" |
    grep -oE '^ +(-[A-Za-z], )?--[a-z][a-z0-9-]*' |
    grep -oE -- '-{1,2}[A-Za-z][a-z0-9-]*' | LC_ALL=C sort -u)
help_long=$(grep -- '^--' <<<"$help_opts")

# --- bash: run the completion function itself -------------------------------
# shellcheck source=/dev/null
source "$bash_file" || {
    echo "FAIL: cannot source $bash_file"
    exit 1
}

# complete WORD... : the last word is the one under the cursor.
complete_words() {
    COMP_WORDS=("$@")
    COMP_CWORD=$(($# - 1))
    COMPREPLY=()
    _pto_par pto-par "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
    printf '%s\n' "${COMPREPLY[@]}" | LC_ALL=C sort -u | sed '/^$/d'
}
expect() { # expect "WANTED LINES" WORD...
    local want=$1 got
    shift
    got=$(complete_words "$@")
    if [[ $got != "$want" ]]; then
        fail "bash: '$*' completed to [$(tr '\n' ' ' <<<"$got")], expected [$(tr '\n' ' ' <<<"$want")]"
    fi
}

bash_opts=$(complete_words pto-par -)
if [[ $bash_opts != "$help_opts" ]]; then
    fail "bash: options differ from --help: $(words_of_diff "$help_opts" "$bash_opts")"
fi

modes=$(printf '%s\n' failed group none stream)
expect "$modes" pto-par --output ''
expect "$modes" pto-par --output = ''
expect "stream" pto-par -x --output = st
expect "--output=group" pto-par --output=g
expect "$(printf '%s\n' auto none)" pto-par -d ''
expect "$(printf '%s\n' auto none)" pto-par --devices = ''
expect "auto" pto-par -j ''
expect "auto" pto-par -xj ''
expect "--jobs" pto-par --jobs

scratch=$(mktemp -d) || exit 1
trap 'rm -rf "$scratch"' EXIT
mkdir "$scratch/logs" && : >"$scratch/tests.cmds"
(
    cd "$scratch" || exit 1
    expect "logs" pto-par --log-dir ''
    expect "$(printf '%s\n' logs tests.cmds)" pto-par -x ''
    expect "tests.cmds" pto-par -j 4 t
    expect "" pto-par tests.cmds ''
    expect "" pto-par tests.cmds -
    exit "$status"
) || status=1

# --- zsh: the _arguments specs name the same options -------------------------
zsh_long=$(grep -oE -- '--[a-z][a-z0-9-]*' "$zsh_file" | LC_ALL=C sort -u)
zsh_short=$(grep -oE -- "[{,'(]-[A-Za-z][+,}]" "$zsh_file" | grep -oE -- '-[A-Za-z]' | LC_ALL=C sort -u)
help_short=$(grep -- '^-[A-Za-z]$' <<<"$help_opts")
if [[ $zsh_long != "$help_long" ]]; then
    fail "zsh: long options differ from --help: $(words_of_diff "$help_long" "$zsh_long")"
fi
if [[ $zsh_short != "$help_short" ]]; then
    fail "zsh: short options differ from --help: $(words_of_diff "$help_short" "$zsh_short")"
fi
if command -v zsh >/dev/null 2>&1; then
    zsh -n "$zsh_file" || fail "zsh: $zsh_file does not parse"
else
    echo "note: zsh not installed; $zsh_file checked by its text only"
fi

((status == 0)) && echo "ok: bash and zsh complete the $(wc -l <<<"$help_opts") options of --help"
exit $status
