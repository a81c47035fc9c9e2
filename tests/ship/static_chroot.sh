#!/bin/bash
# The static pto-par runs in an otherwise empty root that holds nothing but
# busybox as /bin/sh and a /dev/null, the way it would in a FROM busybox or
# FROM scratch container: two passing jobs give their output and exit 0, a
# failing job gives exit 1. Also: the binary is static, pulls in no NSS or
# dlopen, and is under 3 MiB once stripped (2.1 MiB in this version).
# Skipped (77) unless the build has -Dstatic=true, and when not root (chroot
# and mknod need it) or busybox is missing.
# Usage: static_chroot.sh STATIC_OPTION PTO_PAR
set -u

if (($# != 2)); then
    echo "usage: $0 STATIC_OPTION PTO_PAR" >&2
    exit 2
fi
static=$1 pto_par=$2
if [[ $static != true ]]; then
    echo "this build is not -Dstatic=true; skipping"
    exit 77
fi

status=0
fail() {
    echo "FAIL: $*"
    status=1
}

# --- the binary itself -------------------------------------------------------
if command -v readelf >/dev/null 2>&1; then
    if readelf -lW "$pto_par" | grep -q 'INTERP'; then
        fail "$pto_par has a program interpreter: it is not static"
    fi
    if readelf -dW "$pto_par" 2>/dev/null | grep -q 'NEEDED'; then
        fail "$pto_par needs shared libraries: $(readelf -dW "$pto_par" | grep NEEDED)"
    fi
fi
# A static glibc does NSS (users, groups, hosts) only by loading the shared
# libraries the static binary was meant to avoid: none of it may be linked in.
# (dlopen itself is, unavoidably: libstdc++'s locale code pulls in iconv, whose
# gconv can load charset modules. It is never reached: pto-par never calls
# setlocale, and the C locale's conversions are built into libc.)
if command -v nm >/dev/null 2>&1; then
    nss=$(nm "$pto_par" 2>/dev/null |
        grep -E ' [TtWw] (getpw(nam|uid|ent)|getgr(nam|gid|ent|ouplist)|initgroups|getspnam|getaddrinfo|getnameinfo|gethostby|getservby|__nss_|_nss_)' || true)
    if [[ -n $nss ]]; then
        fail "NSS code is linked in:"
        printf '  %s\n' "$nss"
    fi
fi
if command -v strip >/dev/null 2>&1; then
    stripped=$(mktemp) || exit 1
    strip -o "$stripped" "$pto_par"
    size=$(stat -c %s "$pto_par") stripped_size=$(stat -c %s "$stripped")
    rm -f "$stripped"
    echo "size: $size bytes, $stripped_size bytes stripped"
    ((stripped_size < 3 * 1024 * 1024)) || fail "stripped, it is $stripped_size bytes, over 3 MiB"
fi

# --- an empty root with busybox ----------------------------------------------
if ((EUID != 0)); then
    echo "not root: cannot chroot; skipping the run in an empty root"
    exit $((status == 0 ? 77 : status))
fi
busybox=
for candidate in /bin/busybox /usr/bin/busybox; do
    [[ -x $candidate ]] && busybox=$candidate && break
done
chroot=$(command -v chroot)
if [[ -z $busybox || -z $chroot ]]; then
    echo "busybox or chroot not found; skipping the run in an empty root"
    exit $((status == 0 ? 77 : status))
fi
if readelf -lW "$busybox" 2>/dev/null | grep -q INTERP; then
    echo "$busybox is not static (Debian: busybox-static); skipping the run in an empty root"
    exit $((status == 0 ? 77 : status))
fi

root=$(mktemp -d) || exit 1
trap 'rm -rf "$root"' EXIT
mkdir "$root/bin" "$root/dev" "$root/tmp"
cp "$pto_par" "$root/pto-par"
cp "$busybox" "$root/bin/busybox"
for applet in sh echo sleep true false cat; do
    ln -s busybox "$root/bin/$applet"
done
mknod -m 666 "$root/dev/null" c 1 3 || {
    echo "mknod failed; skipping the run in an empty root"
    exit $((status == 0 ? 77 : status))
}
chmod 1777 "$root/tmp"

# run FILE_TEXT ARG... : pto-par on that commands file inside the root.
run() {
    local text=$1
    shift
    printf '%s' "$text" >"$root/jobs.cmds"
    env -i PATH=/bin "$chroot" "$root" /pto-par "$@" /jobs.cmds >"$root/out" 2>"$root/err"
}
show() {
    echo "--- stdout"; cat "$root/out"
    echo "--- stderr"; cat "$root/err"
}

run $'@0 echo one $PTO_PAR_SEQ\n@0 sleep 0.2; echo two {seq} $PTO_PAR_LABEL\n' -d none --json /tmp/report.json
rc=$?
if ((rc != 0)); then
    fail "two passing jobs: exit $rc, not 0"
    show
elif [[ $(LC_ALL=C sort "$root/out") != $'one 1\ntwo 2 sleep' ]]; then
    fail "two passing jobs: unexpected output"
    show
elif ! grep -q '2 passed, 0 failed' "$root/err"; then
    fail "two passing jobs: no summary line"
    show
elif [[ $(wc -l <"$root/tmp/report.json") != 2 ]]; then
    fail "two passing jobs: --json did not get two records"
    show
else
    echo "ok: two jobs ran and passed in the empty root"
fi

run $'@0 echo three; exit 3\n@0 true\n' -d none
rc=$?
if ((rc != 1)); then
    fail "a failing job: exit $rc, not 1"
    show
elif ! grep -q 'FAIL echo exit=3' "$root/err" || ! grep -q '1 passed, 1 failed' "$root/err"; then
    fail "a failing job: its FAIL line or the summary is missing"
    show
elif [[ $(cat "$root/out") != three ]]; then
    fail "a failing job: its output is missing"
    show
else
    echo "ok: a failing job gives exit 1 in the empty root"
fi

exit $status
