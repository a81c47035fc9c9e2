# Sourced by the CI scripts: `timed LABEL COMMAND...` runs COMMAND, returns
# its status and appends "LABEL<TAB>SECONDS" to $CI_TIMES, so that .ci/run can
# print every stage's wall time at the end, whichever script ran the stage.
: "${CI_TIMES:=$PWD/build-times.tsv}"
export CI_TIMES
timed() {
    local label=$1 start=$SECONDS rc
    shift
    "$@"
    rc=$?
    printf '%s\t%d\n' "$label" $((SECONDS - start)) >>"$CI_TIMES"
    return $rc
}
# "1234" seconds as "20m34s".
minutes() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }
