#!/usr/bin/env bash
# pto-par --launcher slurm against a real two-node Slurm started here
# (cluster.sh): each scenario runs inside its own allocation of both nodes,
# two fake GPUs each, and ends by checking that no step is left.
# Usage: scenarios.sh PTO_PAR [SCENARIO...]   (exit 77: cannot run here)
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
pto_par=$(realpath "$1")
shift
# node_down last: it kills a slurmd, and the scenarios of one invocation
# share a cluster.
all=(spread static fifo fail_fast interrupt timeout killed refused gpus nested reports leftover grace escape stubborn
     verdicts clean pending scancel scancel_hangs sick sick_retry sick_bad_end sick_timeout sick_hang sick_cpu late_header check_vars node_down)
wanted=("$@")
[ ${#wanted[@]} -gt 0 ] || wanted=("${all[@]}")

# Whether this machine can run a local Slurm is found once per `meson test`:
# the first scenario that cannot start the cluster leaves the reason in
# $PTO_PAR_SLURM_VERDICT (set by meson.build), keyed by that meson process (pid and start time),
# and the others skip at once with it.
verdict=${PTO_PAR_SLURM_VERDICT:-}
run_key=
if [ -n "$verdict" ]; then
    run_key="$PPID $(cut -d' ' -f22 "/proc/$PPID/stat" 2>/dev/null)"
    if [ "$(head -1 "$verdict" 2>/dev/null)" = "$run_key" ]; then
        tail -n +2 "$verdict"
        exit 77
    fi
fi
work=$(mktemp -d /tmp/pto-par-slurm.XXXXXX)
cleanup() {
    "$here/cluster.sh" stop "$work/cluster"
    rm -rf "$work"
}
trap cleanup EXIT
# meson's timeout and Ctrl-C: still stop the daemons on the way out.
trap 'exit 143' TERM
trap 'exit 130' INT
"$here/cluster.sh" start "$work/cluster" 2>"$work/start.err"
case $? in
    0) ;;
    77)
        cat "$work/start.err"
        # A 77 without its SKIP line came from something cluster.sh ran, not
        # from its own verdict: that is a failure, not a reason to skip.
        reason=$(grep '^SKIP:' "$work/start.err") || { echo "FAIL: the cluster start ended 77 without a reason"; exit 1; }
        [ -n "$run_key" ] && printf '%s\n%s (found by an earlier test of this run)\n' "$run_key" "$reason" >"$verdict"
        exit 77 ;;
    *) cat "$work/start.err"; echo "FAIL: the cluster did not start"; exit 1 ;;
esac
export SLURM_CONF=$work/cluster/slurm.conf

failed=0
fail() { echo "  FAIL: $*"; failed=1; }

# Runs "$@" in a fresh allocation of both nodes; the allocation's steps
# must all be gone when it returns. $gpus: how the allocation asks for GPUs.
gpus=--gres=gpu:2
tasks=4
in_allocation() {
    salloc -Q -N2 --ntasks-per-node=$tasks $gpus -t 5 bash -c '
        "$@"; rc=$?
        # srun'"'"'s exit is seen before slurmctld has forgotten the step: a short wait.
        for _ in $(seq 50); do [ -z "$(squeue -h -s -j "$SLURM_JOB_ID")" ] && break; sleep 0.1; done
        left=$(squeue -h -s -j "$SLURM_JOB_ID")
        [ -z "$left" ] || { echo "steps left after the run: $left"; exit 99; }
        exit $rc' inner "$@"
}

# Each job records "node devices start end cuda step_gpus" from inside its task.
record='s=$(date +%s.%N); sleep {SLEEP}; echo "$SLURMD_NODENAME $PTO_PAR_DEVICES $s $(date +%s.%N) $CUDA_VISIBLE_DEVICES $SLURM_STEP_GPUS {device_list}" >> '

scenario_spread() {
    local log=$work/spread.log cmds=$work/spread.cmds
    : >"$log"
    for i in $(seq 8); do echo "${record//\{SLEEP\}/0.$((i % 3 + 3))}$log"; done >"$cmds"
    for i in 1 2; do echo "@2 ${record//\{SLEEP\}/0.3}$log"; done >>"$cmds"
    echo "@0 echo none \$PTO_PAR_DEVICES. \$SLURM_STEP_GPUS." >>"$cmds"
    in_allocation "$pto_par" --launcher slurm -e CUDA_VISIBLE_DEVICES --json "$work/spread.json" "$cmds" \
        >"$work/spread.out" 2>"$work/spread.err" || fail "exit $? $(cat "$work/spread.err")"
    [ "$(wc -l <"$log")" = 10 ] || fail "10 records expected, got $(wc -l <"$log")"
    [ "$(cut -d' ' -f1 "$log" | sort -u | tr '\n' ' ')" = "n1 n2 " ] || fail "jobs did not land on both nodes"
    grep -q '^none \. \.$' "$work/spread.out" || fail "a job without devices saw some: $(cat "$work/spread.out")"
    # What the job saw is what Slurm gave it, in every form.
    awk '{ if ($2 != $5 || $2 != $6 || $2 != $7) print "mismatch: " $0 }' "$log" | grep . && fail "device views differ"
    # No device of a node held by two steps at once.
    python3 - "$log" "$work/spread.json" <<'PY' || fail "a device was shared, or the reports disagree"
import json, sys
rec = [l.split() for l in open(sys.argv[1])]
held = [(r[0], set(r[1].split(",")), float(r[2]), float(r[3])) for r in rec]
for i, a in enumerate(held):
    for b in held[i + 1:]:
        if a[0] == b[0] and a[1] & b[1] and a[2] < b[3] and b[2] < a[3]:
            sys.exit(f"shared: {a} {b}")
reports = [r for r in map(json.loads, open(sys.argv[2])) if "record" not in r]  # jobs, not devices
seen = sorted((r["node"], ",".join(map(str, r["devices"]))) for r in reports if r["devices"])
recorded = sorted((r[0], r[1]) for r in rec)
if seen != recorded:
    sys.exit(f"json {seen} != recorded {recorded}")
# A device record per GPU of a node that ran a job, all passed.
devices = [r for r in map(json.loads, open(sys.argv[2])) if r.get("record") == "device"]
counted = {(d["node"], d["device"]): d["jobs"] for d in devices}
used = {}
for r in rec:
    for i in r[1].split(","):
        used[(r[0], int(i))] = used.get((r[0], int(i)), 0) + 1
if counted != used or any(d["passed"] != d["jobs"] for d in devices):
    sys.exit(f"device records {devices} != used {used}")
PY
    grep -q 'START .* node=n[12]' "$work/spread.err" || fail "no node= in the status lines"
}

scenario_static() {
    printf 'echo small\n@3 echo too big\n' >"$work/static.cmds"
    in_allocation "$pto_par" --launcher slurm "$work/static.cmds" >"$work/static.out" 2>&1
    local rc=$?
    [ $rc = 2 ] || fail "exit $rc, 2 expected"
    grep -q "no node of the allocation has more than 2" "$work/static.out" || fail "$(cat "$work/static.out")"
    grep -q small "$work/static.out" && fail "a job ran despite the static check"
}

# The head waits for a whole node; nothing behind it passes, although a
# node has a GPU free the whole time.
scenario_fifo() {
    cat >"$work/fifo.cmds" <<CMDS
@label=a sleep 1.5
@label=b sleep 0.5
@2,label=head sleep 0.2
@label=behind true
CMDS
    in_allocation "$pto_par" --launcher slurm -j 8 --json "$work/fifo.json" "$work/fifo.cmds" \
        >/dev/null 2>"$work/fifo.err" || fail "exit $? $(cat "$work/fifo.err")"
    python3 - "$work/fifo.json" <<'PY' || fail "FIFO not kept per node"
import json, sys
r = {j["label"]: j for j in map(json.loads, open(sys.argv[1])) if "record" not in j}
# a and b on different nodes; the head waits for b's node to be whole
# again, and behind, though a GPU of a's node is free all along, is not
# sent before the head (the two are sent together when b ends: which task
# Slurm runs first is Slurm's).
assert r["a"]["node"] != r["b"]["node"], r
assert r["head"]["start"] >= r["b"]["end"] - 0.05, r
assert r["behind"]["start"] >= r["b"]["end"] - 0.05, r
assert r["behind"]["start"] < r["a"]["end"], r
PY
}

# The loop, not `sleep 60 & wait`: Slurm signals the step's processes one
# by one, the sleep first, and a shell whose `wait` ends with its child
# may exit before its own SIGTERM comes, without the trap.
trapper='trap "echo got TERM on \$SLURMD_NODENAME; exit 143" TERM; echo ready; while :; do sleep 0.2; done'

scenario_fail_fast() {
    # The failing job waits until both traps are set: a step whose task has
    # not started yet (slow under ASan) is stopped without one.
    local ready="trap \"echo got TERM on \\\$SLURMD_NODENAME; exit 143\" TERM; touch $work/ff-ready.\$SLURM_STEP_ID; while :; do sleep 0.2; done"
    # A second more for srun to hand the run both steps' headers: until it
    # has, the run takes a step for one Slurm has not started, and cancels it.
    local failing="until [ \$(ls $work/ff-ready.* 2>/dev/null | wc -l) -ge 2 ]; do sleep 0.1; done; sleep 1; exit 3"
    printf '%s\n%s\n%s\n' "$ready" "$ready" "$failing" >"$work/ff.cmds"
    local t0=$SECONDS
    in_allocation "$pto_par" --launcher slurm -x --kill-grace 10 "$work/ff.cmds" >"$work/ff.out" 2>"$work/ff.err"
    local rc=$?
    [ $rc = 1 ] || fail "exit $rc, 1 expected: $(cat "$work/ff.err")"
    [ "$(grep -c '^got TERM' "$work/ff.out")" = 2 ] ||
        fail "the traps did not see SIGTERM: $(cat "$work/ff.out" "$work/ff.err")"
    [ "$(grep -c '] KILLED ' "$work/ff.err")" = 2 ] || fail "two KILLED expected: $(cat "$work/ff.err")"
    ((SECONDS - t0 < 20)) || fail "fail-fast took $((SECONDS - t0)) s"
}

scenario_interrupt() {
    printf '%s\n%s\n' "$trapper" "$trapper" >"$work/int.cmds"
    in_allocation bash -c '
        "$1" --launcher slurm --output stream "$2" >"$3.out" 2>"$3.err" & pid=$!
        # Both traps are set once both have said ready (a loaded machine
        # may take long after START).
        for _ in $(seq 200); do [ "$(grep -c "ready$" "$3.out")" = 2 ] && break; sleep 0.1; done
        kill -INT $pid; wait $pid' inner "$pto_par" "$work/int.cmds" "$work/int"
    local rc=$?
    [ $rc = 130 ] || fail "exit $rc, 130 expected: $(cat "$work/int.err")"
    [ "$(grep -c '\] got TERM' "$work/int.out")" = 2 ] || fail "the traps did not see SIGTERM: $(cat "$work/int.out")"
}

scenario_timeout() {
    echo 'trap "echo dumping stacks" USR1; echo ready; sleep 60 & wait; sleep 60 & wait' >"$work/to.cmds"
    echo '@0 sleep 60' >>"$work/to.cmds"
    in_allocation "$pto_par" --launcher slurm --timeout 3 --dump-grace 1 "$work/to.cmds" \
        >"$work/to.out" 2>"$work/to.err"
    local rc=$?
    [ $rc = 124 ] || fail "exit $rc, 124 expected: $(cat "$work/to.err")"
    sed -n '/TIMEOUT/,$p' "$work/to.err" | grep -q 'dumping stacks' || fail "no dump in the TIMEOUT block: $(cat "$work/to.err")"
}

# pto-par SIGKILLed: srun dies of PDEATHSIG and its own helper cancels the step.
scenario_killed() {
    echo "$trapper" >"$work/kill.cmds"
    in_allocation bash -c '
        "$1" --launcher slurm "$2" >"$3.out" 2>"$3.err" & pid=$!
        for _ in $(seq 200); do grep -q START "$3.err" && break; sleep 0.1; done
        kill -KILL $pid; wait $pid' inner "$pto_par" "$work/kill.cmds" "$work/kill"
    local rc=$?
    [ $rc = 137 ] || fail "exit $rc, 137 expected (99: steps were left): $(cat "$work/kill.err")"
}

# A step Slurm refuses is a failed job with Slurm's words, not a hang: the
# refusal comes from an srun in front of the real one that asks for a node
# outside the allocation.
scenario_refused() {
    mkdir -p "$work/bin"
    cat >"$work/bin/srun" <<WRAP
#!/bin/bash
args=("\$@")
for i in "\${!args[@]}"; do [ "\${args[\$i]}" = -w ] && args[\$((i + 1))]=n9 && break; done
exec $(command -v srun) "\${args[@]}"
WRAP
    chmod +x "$work/bin/srun"
    printf 'echo never\n@0 echo never either\n' >"$work/refused.cmds"
    PATH=$work/bin:$PATH in_allocation timeout 60 "$pto_par" --launcher slurm "$work/refused.cmds" \
        >"$work/refused.out" 2>"$work/refused.err"
    local rc=$?
    [ $rc = 1 ] || fail "exit $rc, 1 expected: $(cat "$work/refused.err")"
    [ "$(grep -c '^\[pto-par\] FAIL' "$work/refused.err")" = 2 ] || fail "two FAIL expected: $(cat "$work/refused.err")"
    grep -q 'srun: error' "$work/refused.out" || fail "Slurm's message is not in the output: $(cat "$work/refused.out")"
    grep -q never "$work/refused.out" && fail "a refused job ran"
}

# However the allocation asked for its GPUs, a step asks for its own.
scenario_gpus() {
    printf '@1 echo one $PTO_PAR_DEVICES\n@2 echo two $PTO_PAR_DEVICES\n' >"$work/gpus.cmds"
    local g
    for g in --gpus=4 --gpus-per-node=2 --gres=gpu:2; do
        gpus=$g in_allocation "$pto_par" --launcher slurm "$work/gpus.cmds" >"$work/gpus.out" 2>"$work/gpus.err" ||
            fail "$g: exit $? $(cat "$work/gpus.err" "$work/gpus.out")"
        grep -q '^one [01]$' "$work/gpus.out" && grep -q '^two 0,1$' "$work/gpus.out" ||
            fail "$g: $(cat "$work/gpus.out")"
    done
}

# A run inside a job is local on that job's devices, though the job's
# environment says slurm: the outer job holds both GPUs of a node, the inner
# run's two jobs get one each, on that node, at once.
scenario_nested() {
    printf '@1 echo inner $SLURMD_NODENAME $PTO_PAR_DEVICES; sleep 0.5\n@1 echo inner $SLURMD_NODENAME $PTO_PAR_DEVICES; sleep 0.5\n' \
        >"$work/inner.cmds"
    echo "@2 echo outer \$SLURMD_NODENAME; timeout 20 $pto_par $work/inner.cmds" >"$work/nested.cmds"
    PTO_PAR_LAUNCHER=slurm in_allocation "$pto_par" "$work/nested.cmds" >"$work/nested.out" 2>"$work/nested.err" ||
        fail "exit $? $(cat "$work/nested.err" "$work/nested.out")"
    local node
    node=$(sed -n 's/^outer //p' "$work/nested.out")
    [ "$(grep '^inner' "$work/nested.out" | sort | tr '\n' ' ')" = "inner $node 0 inner $node 1 " ] ||
        fail "outer on $node: $(cat "$work/nested.out" "$work/nested.err")"
}

# Every record has a "node", null for a job that never ran; outside an
# allocation the hint is a command line that works (no -d).
scenario_reports() {
    printf 'exit 3\necho never\n' >"$work/rep.cmds"
    in_allocation "$pto_par" --launcher slurm -x -j 1 --json "$work/rep.json" "$work/rep.cmds" >/dev/null 2>&1
    python3 - "$work/rep.json" <<'PY' || fail "$(cat "$work/rep.json")"
import json, sys
r = [j for j in map(json.loads, open(sys.argv[1])) if "record" not in j]  # jobs, not devices
assert [j["status"] for j in r] == ["failed", "cancelled"], r
assert r[0]["node"] in ("n1", "n2") and r[1]["node"] is None, r
PY
    (unset SLURM_JOB_ID; "$pto_par" --launcher slurm -d 0 "$work/rep.cmds") >/dev/null 2>"$work/hint.err"
    grep -q 'salloc .*--launcher slurm' "$work/hint.err" || fail "no hint: $(cat "$work/hint.err")"
    grep -q 'salloc .* -d 0' "$work/hint.err" && fail "the hint repeats -d: $(cat "$work/hint.err")"
}

# What a job leaves behind is stopped on its node before the job ends.
# Jobs of these scenarios sleep 23xx seconds, so that what is left of them
# can be told from anything else on the machine.
left_behind() { pgrep -f 'sleep 23[0-9][0-9]'; }

scenario_leftover() {
    printf 'sleep 2301 & echo started\n' >"$work/left.cmds"
    local t0=$SECONDS
    in_allocation "$pto_par" --launcher slurm --json "$work/left.json" "$work/left.cmds" >"$work/left.out" \
        2>"$work/left.err" || fail "exit $? $(cat "$work/left.err")"
    ((SECONDS - t0 < 15)) || fail "took $((SECONDS - t0)) s"
    grep -q '^started$' "$work/left.out" || fail "$(cat "$work/left.out")"
    grep -q 'PASS sleep.*(stopped 1 leftover process)' "$work/left.err" || fail "$(cat "$work/left.err")"
    grep -q '"stragglers":1' "$work/left.json" || fail "$(cat "$work/left.json")"
}

# What the line left that ignores SIGTERM gets SIGKILL after --kill-grace,
# as a local job's leftovers do, not after a grace of the agent's own.
scenario_grace() {
    printf '%s\n' "sh -c \"trap '' TERM; sleep 2305\" & echo started" >"$work/grace.cmds"
    in_allocation "$pto_par" --launcher slurm --kill-grace 0.5 --json "$work/grace.json" "$work/grace.cmds" \
        >"$work/grace.out" 2>"$work/grace.err" || fail "exit $? $(cat "$work/grace.err")"
    python3 - "$work/grace.json" <<'PY' || fail "$(cat "$work/grace.json" "$work/grace.err")"
import json, sys
r = [j for j in map(json.loads, open(sys.argv[1])) if "record" not in j]
assert r[0]["status"] == "passed" and r[0]["duration_s"] < 3.5, r
PY
}

# A process that escapes the line's session is stopped before its GPU is
# handed on: the next job on that node, with the same two GPUs, starts after
# the escapee is gone.
scenario_escape() {
    cat >"$work/esc.cmds" <<CMDS
@2,label=escaper (setsid sh -c 'echo \$\$ > $work/esc.pid; exec sleep 2302' &); while [ ! -s $work/esc.pid ]; do sleep 0.05; done; echo escaper \$SLURMD_NODENAME
@2,label=next sleep 0.5; echo \$SLURMD_NODENAME \$(kill -0 \$(cat $work/esc.pid) 2>/dev/null && echo alive || echo gone)
@2,label=other sleep 0.5; echo \$SLURMD_NODENAME \$(kill -0 \$(cat $work/esc.pid) 2>/dev/null && echo alive || echo gone)
CMDS
    in_allocation "$pto_par" --launcher slurm "$work/esc.cmds" >"$work/esc.out" 2>"$work/esc.err" ||
        fail "exit $? $(cat "$work/esc.err")"
    local node
    node=$(sed -n 's/^escaper //p' "$work/esc.out")
    [ "$(grep -c "^$node " "$work/esc.out")" = 1 ] || fail "no job after the escaper on $node: $(cat "$work/esc.out")"
    grep -q "^$node alive" "$work/esc.out" &&
        fail "a job ran on $node while an escapee held its GPUs: $(cat "$work/esc.out")"
}

# A job that lives through SIGTERM under a shell that does not: the shell
# dies, and the job is still stopped (SIGKILL) and nothing is left.
scenario_stubborn() {
    echo "bash -c 'trap \"\" TERM; trap \"echo usr1\" USR1; echo ready; while :; do sleep 2303; done'" >"$work/stub.cmds"
    echo "sleep 2304 & echo started" >>"$work/stub.cmds"
    local t0=$SECONDS
    in_allocation "$pto_par" --launcher slurm --timeout 3 --dump-grace 1 --kill-grace 1 "$work/stub.cmds" \
        >"$work/stub.out" 2>"$work/stub.err"
    local rc=$?
    [ $rc = 124 ] || fail "exit $rc, 124 expected: $(cat "$work/stub.err")"
    ((SECONDS - t0 < 20)) || fail "took $((SECONDS - t0)) s"
}

# A line's end as a local run reports it: the signal that killed it, the
# exit code, and none of srun's or slurmstepd's words in the job's output.
scenario_verdicts() {
    printf '@label=segv kill -SEGV $$\n@label=three exit 3\n' >"$work/ver.cmds"
    in_allocation "$pto_par" --launcher slurm --json "$work/ver.json" "$work/ver.cmds" >"$work/ver.out" \
        2>"$work/ver.err"
    python3 - "$work/ver.json" <<'PY' || fail "$(cat "$work/ver.json" "$work/ver.err")"
import json, sys
r = {j["label"]: j for j in map(json.loads, open(sys.argv[1])) if "record" not in j}
assert r["segv"]["signal"] == "SIGSEGV" and r["segv"]["exit_code"] is None, r["segv"]
assert r["three"]["exit_code"] == 3 and r["three"]["signal"] is None, r["three"]
PY
    grep -q 'srun\|slurmstepd' "$work/ver.out" && fail "Slurm's words in the job's output: $(cat "$work/ver.out")"
}

# Passing steps that left nothing are not said to have left something
# (srun's own helper process is not the job's).
scenario_clean() {
    for i in $(seq 60); do echo true; done >"$work/clean.cmds"
    in_allocation "$pto_par" --launcher slurm -j 8 "$work/clean.cmds" >/dev/null 2>"$work/clean.err" ||
        fail "exit $? $(tail "$work/clean.err")"
    grep 'leftover' "$work/clean.err" && fail "$(grep -c leftover "$work/clean.err") of 60 said to leave processes"
}

# One CPU per node: two steps run, two wait for Slurm. When the run's time
# limit comes, those two never ran: cancelled, and the run ends on time.
scenario_pending() {
    for i in 1 2 3 4; do echo "@label=j$i sleep 2310"; done >"$work/pend.cmds"
    local t0=$SECONDS
    tasks=1 in_allocation "$pto_par" --launcher slurm --timeout 3 --dump-grace 2 --kill-grace 1 \
        --json "$work/pend.json" "$work/pend.cmds" >/dev/null 2>"$work/pend.err"
    local rc=$?
    [ $rc = 124 ] || fail "exit $rc, 124 expected: $(cat "$work/pend.err")"
    python3 - "$work/pend.json" <<'PY' || fail "$(cat "$work/pend.json" "$work/pend.err")"
import json, sys
r = [j for j in map(json.loads, open(sys.argv[1])) if "record" not in j]  # jobs, not devices
assert sorted(j["status"] for j in r) == ["cancelled", "cancelled", "timeout", "timeout"], r
for j in r:
    if j["status"] == "cancelled":
        assert j["start"] is None and j["signal"] is None and j["node"] is None, j
PY
    ((SECONDS - t0 < 15)) || fail "took $((SECONDS - t0)) s"
}

# Four running steps stopped by SIGINT through a scancel that does its work
# and then hangs: the run waits for its scancel helpers once, for all of
# them at once (2 s), not 2 s for each in turn. A step that outlives its
# SIGTERM (seen under ASan: one did, and waited out the 5 s default grace)
# costs one 1 s grace here, still well short of four helpers in series (8 s).
scenario_scancel_hangs() {
    mkdir -p "$work/bin"
    printf '#!/bin/bash\n%s "$@"\nexec sleep 9\n' "$(command -v scancel)" >"$work/bin/scancel"
    chmod +x "$work/bin/scancel"
    for i in 1 2 3 4; do echo "@0,label=s$i touch $work/sh.$i; sleep 2360"; done >"$work/sh.cmds"
    PATH=$work/bin:$PATH in_allocation bash -c '
        "$1" --launcher slurm --kill-grace 1 "$2" >/dev/null 2>"$3.err" & pid=$!
        for _ in $(seq 200); do [ "$(ls "$3".[0-9] 2>/dev/null | wc -l)" = 4 ] && break; sleep 0.05; done
        sleep 0.2
        t0=$(date +%s%N)
        kill -INT $pid; wait $pid; rc=$?
        echo $((($(date +%s%N) - t0) / 1000000)) >"$3.ms"
        exit $rc' inner "$pto_par" "$work/sh.cmds" "$work/sh"
    local rc=$?
    [ $rc = 130 ] || fail "exit $rc, 130 expected: $(cat "$work/sh.err")"
    local ms
    ms=$(cat "$work/sh.ms")
    ((ms < 6000)) || fail "the stop took $ms ms: $(cat "$work/sh.err")"
}

# A step whose line runs but whose header srun has not passed on yet (an
# srun in front of the real one holds its output back two seconds, and ends
# once it is passed on) is no pending step at a stop: its line gets SIGTERM,
# and it is killed, not cancelled.
scenario_late_header() {
    mkdir -p "$work/bin"
    cat >"$work/bin/srun" <<WRAP
#!/bin/bash
$(command -v srun) "\$@" | { sleep 2; exec cat; }
exit \${PIPESTATUS[0]}
WRAP
    chmod +x "$work/bin/srun"
    echo "@label=late trap 'echo got TERM >$work/late.term; exit 143' TERM; touch $work/late.started; sleep 2341 & wait" \
        >"$work/late.cmds"
    PATH=$work/bin:$PATH in_allocation bash -c '
        "$1" --launcher slurm --json "$3.json" "$2" >"$3.out" 2>"$3.err" & pid=$!
        for _ in $(seq 200); do [ -e "$3.started" ] && break; sleep 0.05; done
        kill -INT $pid; wait $pid' inner "$pto_par" "$work/late.cmds" "$work/late"
    local rc=$?
    [ $rc = 130 ] || fail "exit $rc, 130 expected: $(cat "$work/late.err")"
    [ -e "$work/late.term" ] || fail "the line did not get SIGTERM: $(cat "$work/late.err")"
    python3 - "$work/late.json" <<'PY' || fail "$(cat "$work/late.json" "$work/late.err")"
import json, sys
r = [j for j in map(json.loads, open(sys.argv[1])) if "record" not in j]
assert r[0]["status"] == "killed" and r[0]["exit_code"] == 143, r
PY
}

# A GPU whose health check fails (n2:1, by a marker file the check looks
# for) is found before any job runs on it: named once, held by the step that
# found it until the run ends, and every job passes on the others.
scenario_sick() {
    local log=$work/sick.log
    : >"$log"
    touch "$work/sick.n2.1"
    for i in $(seq 10); do echo "${record//\{SLEEP\}/0.$((i % 3 + 3))}$log"; done >"$work/sick.cmds"
    local check="if [ -e $work/sick.\$SLURMD_NODENAME.{devices} ]; then echo bad gpu \$PTO_PAR_DEVICES; exit 1; fi"
    in_allocation "$pto_par" --launcher slurm -j 4 --device-check "$check" \
        --json "$work/sick.json" --junit "$work/sick.xml" "$work/sick.cmds" >"$work/sick.out" 2>"$work/sick.err" ||
        fail "exit $? $(cat "$work/sick.err")"
    [ "$(wc -l <"$log")" = 10 ] || fail "10 records expected, got $(wc -l <"$log"): $(cat "$work/sick.err")"
    grep -q '^n2 1 ' "$log" && fail "a job ran on the sick GPU: $(cat "$log")"
    [ "$(grep -c 'SICK device n2:1' "$work/sick.err")" = 1 ] || fail "not said once: $(cat "$work/sick.err")"
    grep 'SICK' "$work/sick.err" | grep -qv 'n2:1' && fail "a healthy GPU said sick: $(cat "$work/sick.err")"
    grep -q 'device n2:1: .*sick' "$work/sick.err" || fail "no device line: $(cat "$work/sick.err")"
    [ "$(grep -c '^bad gpu 1$' "$work/sick.err")" = 1 ] || fail "the check's words: $(cat "$work/sick.err")"
    grep -q 'bad gpu' "$work/sick.out" && fail "the check's words in the jobs' output"
    grep 'left their job' "$work/sick.err" && fail "srun's own processes taken for escapees"
    grep -q '<property name="device.n2:1.sick" value="true"/>' "$work/sick.xml" || fail "JUnit: $(cat "$work/sick.xml")"
    python3 - "$work/sick.json" <<'PY' || fail "$(cat "$work/sick.json")"
import json, sys
rows = list(map(json.loads, open(sys.argv[1])))
jobs = [r for r in rows if "record" not in r]
assert len(jobs) == 10 and all(j["status"] == "passed" for j in jobs), jobs
assert not any(j["node"] == "n2" and 1 in j["devices"] for j in jobs), jobs
assert all(not j.get("attempts") for j in jobs), jobs  # a job that met the sick GPU never ran there
dev = {(d["node"], d["device"]): d for d in rows if d.get("record") == "device"}
assert dev[("n2", 1)]["sick"] is True and dev[("n2", 1)]["jobs"] == 0, dev
assert not any(d["sick"] for k, d in dev.items() if k != ("n2", 1)), dev
PY
}

# A job fails on a GPU whose check then fails: the step checks it at once,
# holds it, and the job runs again on another GPU (a RETRY naming the sick
# one) and passes.
scenario_sick_retry() {
    cat >"$work/sr.cmds" <<CMDS
@label=once [ -e $work/sr.tried ] || { touch $work/sr.tried $work/sr.bad.\$SLURMD_NODENAME.\$PTO_PAR_DEVICES; exit 3; }; \
echo second on \$SLURMD_NODENAME:\$PTO_PAR_DEVICES
@label=other sleep 0.5
CMDS
    in_allocation "$pto_par" --launcher slurm -j 2 \
        --device-check "test ! -e $work/sr.bad.\$SLURMD_NODENAME.\$PTO_PAR_DEVICES" \
        --json "$work/sr.json" "$work/sr.cmds" >"$work/sr.out" 2>"$work/sr.err" ||
        fail "exit $? $(cat "$work/sr.err")"
    local bad
    bad=$(cd "$work" && ls sr.bad.* 2>/dev/null | sed 's/^sr\.bad\.//; s/\./:/')
    [ -n "$bad" ] || fail "the job did not fail once: $(cat "$work/sr.err")"
    grep -q "RETRY once .*device $bad failed the health check" "$work/sr.err" ||
        fail "RETRY $bad: $(cat "$work/sr.err")"
    [ "$(grep -c "SICK device $bad" "$work/sr.err")" = 1 ] || fail "SICK $bad not said once: $(cat "$work/sr.err")"
    grep -q '^second on ' "$work/sr.out" || fail "$(cat "$work/sr.out" "$work/sr.err")"
    grep -q "^second on $bad\$" "$work/sr.out" && fail "ran again on the sick GPU"
    python3 - "$work/sr.json" "$bad" <<'PY' || fail "$(cat "$work/sr.json")"
import json, sys
rows = list(map(json.loads, open(sys.argv[1])))
node, gpu = sys.argv[2].split(":")
r = {j["label"]: j for j in rows if "record" not in j}
once = r["once"]
assert once["status"] == "passed", once
first = once["attempts"][0]
assert first["status"] == "failed" and first["sick"] == [int(gpu)] and first["node"] == node, once
dev = {(d["node"], d["device"]): d for d in rows if d.get("record") == "device"}
assert dev[(node, int(gpu))]["sick"] and dev[(node, int(gpu))]["failed"] == 1, dev
PY
}

# As sick_retry, but an srun in front of the real one garbles every end
# frame the agents send ("pto-par-end x ..."): the failed try that found
# the sick GPU is still a failure, and how its line ended is unknown, not
# read from a status that was never there.
scenario_sick_bad_end() {
    mkdir -p "$work/bin"
    cat >"$work/bin/srun" <<WRAP
#!/bin/bash
$(command -v srun) "\$@" | sed -u 's/\x1epto-par-end [0-9-]*/\x1epto-par-end x/'
exit \${PIPESTATUS[0]}
WRAP
    chmod +x "$work/bin/srun"
    cat >"$work/be.cmds" <<CMDS
@label=once [ -e $work/be.tried ] || { touch $work/be.tried $work/be.bad.\$SLURMD_NODENAME.\$PTO_PAR_DEVICES; exit 3; }; \
echo second on \$SLURMD_NODENAME:\$PTO_PAR_DEVICES
CMDS
    PATH=$work/bin:$PATH in_allocation "$pto_par" --launcher slurm -j 2 \
        --device-check "test ! -e $work/be.bad.\$SLURMD_NODENAME.\$PTO_PAR_DEVICES" \
        --json "$work/be.json" "$work/be.cmds" >"$work/be.out" 2>"$work/be.err" ||
        fail "exit $? $(cat "$work/be.err")"
    grep -q '^second on ' "$work/be.out" || fail "$(cat "$work/be.out" "$work/be.err")"
    python3 - "$work/be.json" <<'PY' || fail "$(cat "$work/be.json" "$work/be.err")"
import json, sys
r = {j["label"]: j for j in map(json.loads, open(sys.argv[1])) if "record" not in j}
once = r["once"]
assert once["status"] == "passed", once
first = once["attempts"][0]
assert first["status"] == "failed" and first["sick"], once
assert first["exit_code"] is None and first["signal"] is None, once  # not made up
PY
}

# A check that hangs (on n1:0) is stopped at --device-check-timeout, with
# what it started, and the GPU is sick; a job of two GPUs never gets n1.
scenario_sick_hang() {
    touch "$work/hang.n1.0"
    for i in 1 2 3 4; do echo "@label=j$i echo ran on \$SLURMD_NODENAME:\$PTO_PAR_DEVICES"; done >"$work/hang.cmds"
    echo "@2,label=pair echo pair on \$SLURMD_NODENAME" >>"$work/hang.cmds"
    in_allocation "$pto_par" --launcher slurm -j 4 --device-check-timeout 1 \
        --device-check "if [ -e $work/hang.\$SLURMD_NODENAME.{devices} ]; then sleep 2332 & wait; fi" \
        "$work/hang.cmds" >"$work/hang.out" 2>"$work/hang.err" || fail "exit $? $(cat "$work/hang.err")"
    grep -q '^ran on n1:0$' "$work/hang.out" && fail "a job ran on the sick GPU: $(cat "$work/hang.out")"
    [ "$(grep -c '^ran on' "$work/hang.out")" = 4 ] || fail "$(cat "$work/hang.out" "$work/hang.err")"
    grep -q '^pair on n2$' "$work/hang.out" || fail "the pair: $(cat "$work/hang.out" "$work/hang.err")"
    grep -q 'SICK device n1:0: its check ran past --device-check-timeout (1s)' "$work/hang.err" ||
        fail "$(cat "$work/hang.err")"
}

# One CPU per node: the step that holds a sick GPU (n1:0) keeps the only CPU
# of n1, so no step can start there any more. n1 is taken out of the pool,
# said once, and a job already waiting there for Slurm runs on n2.
scenario_sick_cpu() {
    touch "$work/cpu.n1.0"
    for i in 1 2 3 4; do echo "@label=j$i echo ran on \$SLURMD_NODENAME:\$PTO_PAR_DEVICES"; done >"$work/cpu.cmds"
    tasks=1 in_allocation timeout 60 "$pto_par" --launcher slurm -j 4 \
        --device-check "test ! -e $work/cpu.\$SLURMD_NODENAME.{devices}" \
        "$work/cpu.cmds" >"$work/cpu.out" 2>"$work/cpu.err"
    local rc=$?
    [ $rc = 0 ] || fail "exit $rc, 0 expected: $(cat "$work/cpu.err")"
    [ "$(grep -c '^ran on' "$work/cpu.out")" = 4 ] || fail "$(cat "$work/cpu.out" "$work/cpu.err")"
    grep -q '^ran on n1:0$' "$work/cpu.out" && fail "a job ran on the sick GPU"
    [ "$(grep -c 'node n1 taken out' "$work/cpu.err")" = 1 ] || fail "not said once: $(cat "$work/cpu.err")"
    grep 'left their job' "$work/cpu.err" && fail "srun's own processes taken for escapees"
}

# A job that ran out of time leaves its GPU in doubt: the next step that
# gets it checks it first (a job that passed does not), one at a time here,
# so all three land on the same GPU.
scenario_sick_timeout() {
    : >"$work/st.checks"
    cat >"$work/st.cmds" <<CMDS
@label=first,timeout=1 echo \$SLURMD_NODENAME:\$PTO_PAR_DEVICES >$work/st.first; sleep 2331
@label=second echo \$SLURMD_NODENAME:\$PTO_PAR_DEVICES >$work/st.second
@label=third echo \$SLURMD_NODENAME:\$PTO_PAR_DEVICES >$work/st.third
CMDS
    in_allocation "$pto_par" --launcher slurm -j 1 --device-check "echo \$SLURMD_NODENAME:{devices} step \$SLURM_STEP_ID >>$work/st.checks" \
        "$work/st.cmds" >"$work/st.out" 2>"$work/st.err"
    local rc=$? gpu
    [ $rc = 1 ] || fail "exit $rc, 1 expected: $(cat "$work/st.err")"
    gpu=$(cat "$work/st.first")
    if [ "$(cat "$work/st.second" "$work/st.third" | sort -u)" != "$gpu" ]; then
        echo "  (Slurm gave the jobs different GPUs: $(cat "$work/st.first" "$work/st.second" "$work/st.third"))"
        return
    fi
    [ "$(grep -c "^$gpu step " "$work/st.checks")" = 2 ] || fail "checks of $gpu: $(cat "$work/st.checks")"
}

# The check of each GPU of an @2 step sees that GPU alone in every variable
# Slurm sets for the step, as a local check does; the line sees both.
scenario_check_vars() {
    : >"$work/cv.checks"
    local vars='$SLURMD_NODENAME $PTO_PAR_DEVICES|$SLURM_STEP_GPUS|$CUDA_VISIBLE_DEVICES|$GPU_DEVICE_ORDINAL|$ROCR_VISIBLE_DEVICES|$SLURM_GPUS_ON_NODE'
    printf '@2,label=both echo "line %s"\n' "$vars" >"$work/cv.cmds"
    in_allocation "$pto_par" --launcher slurm --device-check "echo \"check $vars\" >>$work/cv.checks" \
        "$work/cv.cmds" >"$work/cv.out" 2>"$work/cv.err" || fail "exit $? $(cat "$work/cv.err")"
    [ "$(wc -l <"$work/cv.checks")" = 2 ] || fail "two checks expected: $(cat "$work/cv.checks" "$work/cv.err")"
    local node gpu rest
    while read -r _ node rest; do
        gpu=${rest%%|*}
        [ "$rest" = "$gpu|$gpu|$gpu|$gpu|$gpu|1" ] || fail "the check of $node:$gpu saw $rest"
    done <"$work/cv.checks"
    grep -q '^line n[12] 0,1|0,1|0,1|0,1|0,1|2$' "$work/cv.out" || fail "the line saw: $(cat "$work/cv.out")"
}

# A node whose slurmd is gone: its steps fail to launch; it is taken out of
# the pool, said once, and its jobs, which never ran, run on the other node.
scenario_node_down() {
    for i in 1 2 3 4; do echo "@label=j$i echo ran on \$SLURMD_NODENAME"; done >"$work/down.cmds"
    in_allocation bash -c 'kill -KILL $(cat "$1"); "${@:2}"' inner "$work/cluster/pid/slurmd.n2" \
        timeout 100 "$pto_par" --launcher slurm -j 4 --json "$work/down.json" "$work/down.cmds" \
        >"$work/down.out" 2>"$work/down.err"
    local rc=$?
    [ $rc = 0 ] || fail "exit $rc, 0 expected: $(cat "$work/down.err")"
    [ "$(grep -c '^ran on n1$' "$work/down.out")" = 4 ] || fail "$(cat "$work/down.out" "$work/down.err")"
    [ "$(grep -c 'node n2 taken out' "$work/down.err")" = 1 ] || fail "not said once: $(cat "$work/down.err")"
}

# A step cancelled from outside (scancel, SIGKILL to the whole step, the
# agent too) is a job killed by SIGKILL, as a local kill -9 would be.
scenario_scancel() {
    cat >"$work/sc.cmds" <<CMDS
@label=victim echo \$SLURM_JOB_ID.\$SLURM_STEP_ID > $work/sc.step; sleep 2320
@0,label=killer until [ -s $work/sc.step ]; do sleep 0.05; done; scancel --ctld --signal=KILL \$(cat $work/sc.step)
CMDS
    in_allocation "$pto_par" --launcher slurm --json "$work/sc.json" "$work/sc.cmds" >/dev/null 2>"$work/sc.err"
    python3 - "$work/sc.json" <<'PY' || fail "$(cat "$work/sc.json" "$work/sc.err")"
import json, sys
r = {j["label"]: j for j in map(json.loads, open(sys.argv[1])) if "record" not in j}
assert r["victim"]["signal"] == "SIGKILL" and r["victim"]["exit_code"] is None, r["victim"]
PY
}

for s in "${wanted[@]}"; do
    echo "--- $s"
    before=$failed
    failed=0
    t0=$SECONDS
    "scenario_$s"
    if left=$(left_behind); then
        fail "processes of a job left: $left"
        kill -KILL $left
    fi
    [ $failed = 0 ] && echo "  ok ($((SECONDS - t0)) s)"
    [ $before = 1 ] && failed=1
done
exit $failed
