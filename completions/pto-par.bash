# bash completion for pto-par(1)                           -*- shell-script -*-
#
# Stand-alone: it needs bash 4 and nothing from the bash-completion package.
# Options as `pto-par --help` lists them (tests/ship/completions.sh checks);
# like pto-par's getopt, the first word that is not an option ends them.

_pto_par_values()
{
    # $1 the option, $2 the text typed so far, $3 a prefix for each result
    # ("--output=" when '=' is not a word break and the option is part of
    # the word).
    local opt=$1 cur=$2 prefix=$3 words=
    case $opt in
    -d | --devices | --device) words='none auto' ;;
    -j | --jobs) words='auto' ;;
    -p | --platform) words='hw' ;;
    -e | --device-env)
        words='CUDA_VISIBLE_DEVICES ASCEND_RT_VISIBLE_DEVICES HIP_VISIBLE_DEVICES ROCR_VISIBLE_DEVICES'
        ;;
    --output) words='group stream failed none' ;;
    --contain) words='auto cgroup pgroup' ;;
    --color) words='auto always never' ;;
    --ci) words='auto github gitlab none' ;;
    --progress) words='auto always never' ;;
    --order) words='file longest' ;;
    --history | --rerun-failed)
        compopt -o filenames 2>/dev/null
        mapfile -t COMPREPLY < <(compgen -f -- "$cur")
        ;;
    --launcher) words='local slurm' ;;
    --json | --junit)
        compopt -o filenames 2>/dev/null
        mapfile -t COMPREPLY < <(compgen -f -- "$cur")
        ;;
    --log-dir)
        compopt -o filenames 2>/dev/null
        mapfile -t COMPREPLY < <(compgen -d -- "$cur")
        ;;
    --lock-dir)
        compopt -o filenames 2>/dev/null
        mapfile -t COMPREPLY < <(compgen -d -- "$cur"; compgen -W none -- "$cur")
        ;;
    --shell)
        compopt -o filenames 2>/dev/null
        if [[ $cur == */* ]]; then
            mapfile -t COMPREPLY < <(compgen -f -- "$cur")
        else
            mapfile -t COMPREPLY < <(compgen -c -- "$cur")
        fi
        ;;
    esac
    # Seconds and counts: nothing to offer.
    if [[ -n $words ]]; then
        mapfile -t COMPREPLY < <(compgen -W "$words" -- "$cur")
    fi
    if [[ -n $prefix ]]; then
        COMPREPLY=("${COMPREPLY[@]/#/$prefix}")
    fi
}

_pto_par()
{
    local cur=${COMP_WORDS[COMP_CWORD]} w need='' i j c
    local long_with_value='--devices --device --jobs --platform --device-env --shell
        --kill-grace --timeout --job-timeout --dump-grace --contain --color --ci --progress --launcher --history --order --shard --rerun-failed --ports --retries --device-slots --device-check --device-check-timeout --output --json --junit --junit-output-limit --log-dir --lock-dir'
    local long_flags='--backfill --tag --fail-fast --dry-run --quiet --verbose --help --version'
    local short_opts='-d -j -p -e -x -n -q -v -h -V'
    COMPREPLY=()

    # Walk the words before the cursor, as getopt would.
    for ((i = 1; i < COMP_CWORD; i++)); do
        w=${COMP_WORDS[i]}
        if [[ -n $need ]]; then
            # "--output = group": '=' is a word break in most setups.
            [[ $w == = ]] && continue
            need=
            continue
        fi
        case $w in
        --)
            # Only FILE may follow, and only one.
            ((i + 1 == COMP_CWORD)) || return 0
            compopt -o filenames 2>/dev/null
            mapfile -t COMPREPLY < <(compgen -f -- "$cur")
            return 0
            ;;
        --*=*) ;;
        --*)
            [[ " ${long_with_value//$'\n'/ } " == *" $w "* ]] && need=$w
            ;;
        -?*)
            # Bundled short options: in -xj the j takes the next word, in
            # -xj4 the rest of this one.
            for ((j = 1; j < ${#w}; j++)); do
                c=${w:j:1}
                if [[ $c == [djpe] ]]; then
                    ((j + 1 == ${#w})) && need=-$c
                    break
                fi
            done
            ;;
        *)
            return 0 # FILE is given; nothing may follow it
            ;;
        esac
    done

    if [[ -n $need ]]; then
        [[ $cur == = ]] && cur=
        _pto_par_values "$need" "$cur" ""
        return 0
    fi
    case $cur in
    --*=*)
        _pto_par_values "${cur%%=*}" "${cur#*=}" "${cur%%=*}="
        ;;
    -*)
        mapfile -t COMPREPLY < <(compgen -W "$long_with_value $long_flags $short_opts" -- "$cur")
        ;;
    *)
        compopt -o filenames 2>/dev/null
        mapfile -t COMPREPLY < <(compgen -f -- "$cur")
        ;;
    esac
    return 0
}

complete -F _pto_par pto-par
