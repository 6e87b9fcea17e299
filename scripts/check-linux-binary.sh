#!/usr/bin/env bash
# Checks a Linux build of the addon before it is packaged: the ELF machine, the shared libraries it
# needs, and the glibc symbol versions it needs (gnu: none newer than GLIBC_2.17, so it loads on
# RHEL/CentOS 7, Debian 8, Ubuntu 14.04 and every later glibc; musl: none at all, and no library
# but musl's libc).
# Prints what it found.
#
#   scripts/check-linux-binary.sh <file.node> <linux-x64-gnu|linux-arm64-gnu|linux-x64-musl|linux-arm64-musl>
#
# Needs readelf and objdump (binutils).
set -euo pipefail
file=$1 pkg=$2
MAX_GLIBC=GLIBC_2.17

machine=$(readelf -h "$file" | sed -n 's/^ *Machine: *//p')
needed=$(readelf -d "$file" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
glibc=$(objdump -T "$file" | grep -oE 'GLIBC_[0-9]+(\.[0-9]+)+' | sort -Vu | tr '\n' ' ' || true)
newest=$(tr " " "\n" <<<"$glibc" | sed "/^$/d" | sort -V | tail -n1)
printf '%s: %s, %s bytes\n  machine: %s\n  needs: %s\n  glibc versions: %s\n  newest: %s\n' \
  "$pkg" "$(basename "$file")" "$(stat -c %s "$file")" "$machine" "$needed" "${glibc:-none}" "${newest:-none}"

fail() { echo "$pkg: $*" >&2; exit 1; }
case $pkg in
  linux-x64-*) [ "$machine" = "Advanced Micro Devices X86-64" ] || fail "built for $machine, not x86-64" ;;
  linux-arm64-*) [ "$machine" = "AArch64" ] || fail "built for $machine, not AArch64" ;;
  *) fail "unknown package (linux-x64-gnu, linux-arm64-gnu, linux-x64-musl or linux-arm64-musl)" ;;
esac
case $pkg in
  *-gnu)
    [ -n "$newest" ] || fail "no glibc symbol versions at all: not linked against glibc?"
    [ "$(printf '%s\n%s\n' "$newest" "$MAX_GLIBC" | sort -V | tail -n1)" = "$MAX_GLIBC" ] \
      || fail "needs $newest, newer than $MAX_GLIBC" ;;
  *-musl)
    [ -z "$glibc" ] || fail "refers to glibc symbol versions: $glibc"
    case " $needed" in *" libc.musl-"*|*" libc.so "*) ;; *) fail "does not link musl's libc: $needed" ;; esac
    # musl's libc and nothing else: Alpine has no libgcc_s or libstdc++ unless a package adds
    # them. (musl's loader answers `libc.so` with the libc it is, whatever the system installed.)
    for lib in $needed; do
      case $lib in libc.so|libc.musl-*.so.1) ;; *) fail "needs $lib besides musl's libc" ;; esac
    done ;;
esac
