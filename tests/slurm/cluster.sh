#!/usr/bin/env bash
# A local two-node Slurm on this machine, for the slurm test suite:
# slurmctld and two slurmd (-N n1, -N n2) on 127.0.0.1, munge, two fake GPUs
# per node (PTO_PAR_SLURM_NODES=N: N nodes, for bench/slurm_dispatch) (character devices with /dev/null's numbers, which is what gres.conf
# needs to hand CUDA_VISIBLE_DEVICES to steps). Everything lives in DIR.
#
#   cluster.sh start DIR   # installs the Debian packages if missing; prints nothing on success
#   cluster.sh stop DIR    # stops every daemon it started, by recorded PID
#
# Clients then need SLURM_CONF=DIR/slurm.conf (DIR/env.sh sets it).
# Exit 77 (skip) when this machine cannot run a local Slurm (not root, no
# cgroup file system where slurmd wants one, a daemon that dies at start),
# with the reason on stderr; under CI=true such a machine is an error (exit 1):
# CI must run the suite, not skip it.
set -uo pipefail

cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start|stop DIR" >&2; exit 2; }
count=${PTO_PAR_SLURM_NODES:-2}
[[ $count =~ ^[1-9][0-9]?$ ]] || { echo "PTO_PAR_SLURM_NODES=$count: 1 to 99 nodes" >&2; exit 2; }
nodes=()
for i in $(seq "$count"); do nodes+=("n$i"); done

# Only a PID we recorded, and only while it still is the daemon we started:
# a recycled PID belongs to someone else. All get SIGTERM at once (each
# takes about 2 s to exit), then SIGKILL whatever is left after 10 s.
stop() {
    local names=() pids=() name file pid i
    for file in "$dir"/pid/*; do
        [ -f "$file" ] || continue
        name=$(basename "$file")
        name=${name%%.*}
        pid=$(cat "$file")
        rm -f "$file"
        [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$name" ] || continue
        kill -TERM "$pid" 2>/dev/null && names+=("$name") && pids+=("$pid")
    done
    for _ in $(seq 100); do
        local alive=0
        for i in "${!pids[@]}"; do
            [ "$(cat "/proc/${pids[$i]}/comm" 2>/dev/null)" = "${names[$i]}" ] && alive=1
        done
        [ $alive = 0 ] && return 0
        sleep 0.1
    done
    for i in "${!pids[@]}"; do
        [ "$(cat "/proc/${pids[$i]}/comm" 2>/dev/null)" = "${names[$i]}" ] && kill -KILL "${pids[$i]}" 2>/dev/null
    done
    return 0
}

if [ "$cmd" = stop ]; then
    stop
    exit 0
fi
[ "$cmd" = start ] || { echo "usage: $0 start|stop DIR" >&2; exit 2; }

# This machine cannot run a local Slurm: a skip, except where CI says it must.
cannot_run() {
    if [ "${CI:-}" = true ]; then
        echo "cannot run a local Slurm here (and CI=true requires it): $1" >&2
        exit 1
    fi
    echo "SKIP: cannot run a local Slurm here: $1" >&2
    exit 77
}

[ "$(id -u)" = 0 ] || cannot_run "it needs root (daemons as root, mknod for fake GPUs)"
# Slurm 22.05's slurmd loads its cgroup plugin whatever ProctrackType says,
# and dies at once without one (a container or chroot without /sys/fs/cgroup).
case $(stat -f -c %T /sys/fs/cgroup 2>/dev/null) in
    cgroup2fs | tmpfs) ;;
    *) cannot_run "slurmd needs a cgroup file system mounted on /sys/fs/cgroup, and there is none" ;;
esac
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v srun >/dev/null ||
   ! command -v munged >/dev/null; then
    echo "installing slurmctld slurmd slurm-client munge" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=600 --no-install-recommends \
        slurmctld slurmd slurm-client munge >/dev/null || cannot_run "cannot install Slurm's Debian packages"
fi
for port in $(seq 6817 $((6817 + count))); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        echo "port $port is in use: another Slurm is running here" >&2
        exit 1
    fi
done

mkdir -p "$dir"/{pid,log,state,munge,etc,dev}
chmod 700 "$dir/munge"
# The daemons' own words first, so that the reason is on screen, then stop.
fail() {
    for f in "$dir"/log/*.log; do [ -f "$f" ] && { echo "--- $f" >&2; tail -15 "$f" >&2; }; done
    stop
    cannot_run "$1"
}

cpus=$(nproc)
mem=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 / 2 ))
cat >"$dir/slurm.conf" <<CONF
ClusterName=ptopar
SlurmctldHost=$(hostname)(127.0.0.1)
SlurmctldPort=6817
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket.2
StateSaveLocation=$dir/state/ctld
SlurmdSpoolDir=$dir/state/%n
SlurmctldPidFile=$dir/state/slurmctld.selfpid
SlurmdPidFile=$dir/state/slurmd.%n.selfpid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
ReturnToService=2
MpiDefault=none
MailProg=/bin/true
SlurmdParameters=config_overrides
CONF
for i in $(seq "$count"); do
    echo "NodeName=n$i NodeHostname=$(hostname) NodeAddr=127.0.0.1 Port=$((6817 + i)) CPUs=4 Boards=1 SocketsPerBoard=1 CoresPerSocket=4 ThreadsPerCore=1 RealMemory=$mem Gres=gpu:2"
done >>"$dir/slurm.conf"
echo "PartitionName=local Nodes=n[1-$count] Default=YES MaxTime=INFINITE State=UP" >>"$dir/slurm.conf"
: >"$dir/gres.conf"
for n in "${nodes[@]}"; do
    mkdir -p "$dir/dev/$n" "$dir/state/$n"
    for i in 0 1; do
        [ -c "$dir/dev/$n/gpu$i" ] || mknod -m 666 "$dir/dev/$n/gpu$i" c 1 3 || fail "mknod failed"
    done
    echo "NodeName=$n Name=gpu File=$dir/dev/$n/gpu[0-1]" >>"$dir/gres.conf"
done
echo "export SLURM_CONF=$dir/slurm.conf" >"$dir/env.sh"
export SLURM_CONF=$dir/slurm.conf

[ -f "$dir/munge/munge.key" ] || dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$dir/munge/munge.key"
munged --force -S "$dir/munge/munge.socket.2" --key-file "$dir/munge/munge.key" \
    --pid-file "$dir/munge/munged.pid" --log-file "$dir/log/munged.log" --seed-file "$dir/munge/seed" ||
    fail "munged did not start"
cp "$dir/munge/munged.pid" "$dir/pid/munged"

slurmctld -D -f "$dir/slurm.conf" >"$dir/log/slurmctld.out" 2>&1 &
echo $! >"$dir/pid/slurmctld"
for n in "${nodes[@]}"; do
    # -N always: without it a slurmd takes the first node's name and kills its daemon.
    slurmd -D -N "$n" -f "$dir/slurm.conf" >"$dir/log/slurmd.$n.out" 2>&1 &
    echo $! >"$dir/pid/slurmd.$n"
done

# A daemon that exits during the wait never comes back: said at once, with
# the error it logged, instead of after the 30 s.
dead_daemon() {
    local file name pid
    for file in "$dir"/pid/slurm*; do
        name=$(basename "$file")
        pid=$(cat "$file")
        [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "${name%%.*}" ] && continue
        echo "$name exited at start: $(grep -h 'error:' "$dir/log/$name.log" "$dir/log/$name.out" 2>/dev/null | tail -2 | tr '\n' ' ' | sed 's/ *$//')"
        return 0
    done
    return 1
}
for _ in $(seq 300); do
    if [ "$(sinfo -h -o '%t %D' 2>/dev/null)" = "idle $count" ]; then
        exit 0
    fi
    if reason=$(dead_daemon); then
        fail "$reason"
    fi
    sleep 0.1
done
fail "the $count nodes did not come up idle within 30 s: $(sinfo -h 2>&1)"
