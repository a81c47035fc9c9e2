# Sourced by the install checks (tests/ship, tests/mp): `meson install
# --destdir` into a fresh directory, $dest, removed at exit. The sourcing
# script sets $meson, $build and $prefix first.

dest=$(mktemp -d) || exit 1
trap 'rm -rf "$dest"' EXIT

# A Meson directory option under $dest; relative to the prefix unless absolute.
under_prefix() {
    case $1 in
    /*) printf '%s%s\n' "$dest" "$1" ;;
    *) printf '%s%s/%s\n' "$dest" "$prefix" "$1" ;;
    esac
}

# Installs the build under $dest; if that fails, prints Meson's log and exits 1.
stage_install() {
    local log
    if ! log=$("$meson" install -C "$build" --destdir "$dest" --no-rebuild 2>&1); then
        printf '%s\n' "$log"
        echo "FAIL: meson install exited non-zero"
        exit 1
    fi
}

# pkg-config sees only the .pc files installed in LIBDIR (a path under $dest).
use_staged_pkgconfig() {
    export PKG_CONFIG_LIBDIR="$1/pkgconfig" PKG_CONFIG_PATH=
    export PKG_CONFIG_SYSROOT_DIR="$dest"
    export PKG_CONFIG_ALLOW_SYSTEM_CFLAGS=1 PKG_CONFIG_ALLOW_SYSTEM_LIBS=1
}
