#!/usr/bin/env bash
# Cross-builds the two macOS packages on this Linux machine with cargo-zigbuild (zig from PyPI,
# as scripts/build-linux.sh does for Linux), as far as that goes without Apple's SDK:
#
#   darwin-arm64  aarch64-apple-darwin, macOS 11.0 and later (the release's deployment targets)
#   darwin-x64    x86_64-apple-darwin, macOS 10.15 and later
#
# A binary that links is checked (scripts/check-macos-binary.mjs: the CPU, the oldest macOS it
# asks for, only the system's own libraries and frameworks loaded) and left in $MAC_DIR/out/<package>,
# where `npm run release:dry-run` takes it. zig brings macOS's libSystem but none of Apple's
# frameworks; when the link asks for one, the script says which frameworks are missing and
# which crates ask for them (their link declarations), and exits with status 3.
#
#   scripts/build-macos.sh [--release] [package…]     (default: both, debug builds)
#
# Exit status: 0 every package built and passed its checks; 3 a link needs the macOS SDK
# (nothing else failed); 1 anything else; 2 bad arguments. Debug by default: the question here is
# whether and against what it links, and the release profile's LTO takes far longer on a shared
# two-core machine; --release builds what the release workflow builds (natively, on macOS).
# Needs Rust (rustup), Node.js >= 20 with npm and python3 with venv (installed with apt-get when
# missing); installs zig and cargo-zigbuild as scripts/zig-tools.sh says, and the rustup targets.
# Environment: MAC_DIR (default target/macos), CARGO_TARGET_DIR (default $MAC_DIR/cargo).
set -euo pipefail
shopt -s inherit_errexit

ROOT=$(cd "$(dirname "$0")/.." && pwd)
MAC_DIR=$(mkdir -p "${MAC_DIR:-$ROOT/target/macos}" && cd "${MAC_DIR:-$ROOT/target/macos}" && pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$MAC_DIR/cargo}
# shellcheck source=scripts/zig-tools.sh
. "$ROOT/scripts/zig-tools.sh"

declare -A TRIPLE=([darwin-arm64]=aarch64-apple-darwin [darwin-x64]=x86_64-apple-darwin)
declare -A DEPLOYMENT_TARGET=([darwin-arm64]=11.0 [darwin-x64]=10.15)
PROFILE=debug
PACKAGES=()
for arg in "$@"; do
  case $arg in
    --release) PROFILE=release ;;
    darwin-arm64|darwin-x64) PACKAGES+=("$arg") ;;
    *) echo "usage: $0 [--release] [darwin-arm64] [darwin-x64]" >&2; exit 2 ;;
  esac
done
[ ${#PACKAGES[@]} -gt 0 ] || PACKAGES=(darwin-arm64 darwin-x64)
REPORT="$MAC_DIR/report.txt"
NEEDS_SDK=3

step() { printf '\n== %s\n' "$*"; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

install_tools() {
  if ! python3 -c 'import ensurepip' 2>/dev/null; then
    step "apt-get install python3-venv"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv
  fi
  install_zig_tools
  local targets=()
  for p in "${PACKAGES[@]}"; do targets+=("${TRIPLE[$p]}"); done
  step "rustup target add ${targets[*]}"
  rustup target add "${targets[@]}"
  [ -d "$ROOT/node_modules/@napi-rs/cli" ] || (cd "$ROOT" && npm ci --no-audit --no-fund)
}

# why_sdk <package> <log>: the frameworks the failed link could not find, and the crates (of
# this target's dependency graph) whose link declarations ask for each.
why_sdk() {
  local pkg=$1 log=$2 triple=${TRIPLE[$1]}
  local frameworks
  frameworks=$(grep -oE "unable to find framework '[^']+'|framework not found [A-Za-z0-9_]+" "$log" \
    | sed -E "s/unable to find framework '([^']+)'/\1/; s/framework not found //" | sort -u | tr '\n' ' ')
  [ -n "$frameworks" ] || return 1
  echo "$pkg: the link stops at Apple's frameworks, which zig does not ship: ${frameworks% }" | tee -a "$REPORT"
  local declared
  # shellcheck disable=SC2016 # JavaScript, not shell
  declared=$( (cd "$ROOT" && cargo metadata --format-version 1 --filter-platform "$triple" 2>/dev/null) | node -e '
    const fs = require("fs"), path = require("path")
    const wanted = process.argv[1].trim().split(/\s+/)
    const meta = JSON.parse(fs.readFileSync(0, "utf8"))
    const inGraph = new Set(meta.resolve.nodes.map((n) => n.id))
    const lines = []
    for (const pkg of meta.packages.filter((p) => inGraph.has(p.id))) {
      const dir = path.dirname(pkg.manifest_path)
      const files = []
      const walk = (d) => { for (const e of fs.readdirSync(d, { withFileTypes: true })) {
        const f = path.join(d, e.name)
        if (e.isDirectory()) { if (e.name !== "target" && e.name !== "tests" && e.name !== "examples") walk(f) }
        else if (f.endsWith(".rs")) files.push(f)
      } }
      walk(dir)
      for (const file of files) {
        fs.readFileSync(file, "utf8").split("\n").forEach((text, i) => {
          for (const fw of wanted) {
            const declares = new RegExp(`name\\s*=\\s*"${fw}"\\s*,\\s*kind\\s*=\\s*"framework"|kind\\s*=\\s*"framework"\\s*,\\s*name\\s*=\\s*"${fw}"|rustc-link-lib=framework=${fw}\\b`)
            if (declares.test(text)) lines.push(`  ${fw}: ${pkg.name} ${pkg.version} (${path.relative(dir, file)}:${i + 1})`)
          }
        })
      }
    }
    console.log([...new Set(lines)].sort().join("\n") || "  (no crate of the graph declares them: see the log)")
  ' "$frameworks")
  echo "$declared" | tee -a "$REPORT"
  # How each declaring crate comes in: the first path from it up to a crate of this workspace.
  local crate
  for crate in $(echo "$declared" | awk '$2 != "" && $3 ~ /^[0-9]/ {print $2 "@" $3}' | sort -u); do
    (cd "$ROOT" && cargo tree --offline -i "$crate" --target "$triple" -e normal,build --prefix depth 2>/dev/null) \
      | awk -v crate="$crate" 'NR == 1 { chain = $0 } NR > 1 { chain = chain " <- " $0 } /\(\// { print "  " crate " comes in through: " chain; exit }' \
      | sed -E 's/(^|<- |through: )[0-9]+/\1/g; s/ \([^)]*\)//g' | tee -a "$REPORT"
  done
  # Symbols the linker named as missing, when it got that far.
  grep -oE "undefined symbol: [^ ]+" "$log" | sort -u | head -n 20 | sed 's/^/  /' | tee -a "$REPORT" || true
  return 0
}

# build <package>: 0 built and checked, $NEEDS_SDK the SDK is needed, 1 anything else.
build() {
  local pkg=$1 triple=${TRIPLE[$1]} out="$MAC_DIR/out/$1" log="$MAC_DIR/build-$1.log"
  step "build $pkg ($triple, $PROFILE, macOS ${DEPLOYMENT_TARGET[$pkg]} and later)"
  rm -rf "$out" && mkdir -p "$out"
  local command=(npx napi build --platform --target "$triple" -x --output-dir "$out")
  # The release build remaps the build machine's paths out of the binary (scripts/release-build.mjs).
  [ "$PROFILE" = release ] && command=(node scripts/release-build.mjs --target "$triple" -x --output-dir "$out")
  local status=0
  (cd "$ROOT" && MACOSX_DEPLOYMENT_TARGET=${DEPLOYMENT_TARGET[$pkg]} nice -n 19 "${command[@]}") >"$log" 2>&1 || status=$?
  tail -n 5 "$log" | sed 's/^/  | /'
  if [ "$status" -ne 0 ]; then
    if why_sdk "$pkg" "$log"; then return "$NEEDS_SDK"; fi
    echo "$pkg: the build failed (not for want of the SDK): $log" | tee -a "$REPORT"
    return 1
  fi
  local binary="$out/cursor-acp-native.$pkg.node"
  node "$ROOT/scripts/check-macos-binary.mjs" "$binary" "$pkg" | tee -a "$REPORT" || return 1
  if [ "$PROFILE" = release ]; then node "$ROOT/scripts/check-build-paths.mjs" "$binary" || return 1; fi
}

main() {
  local started=$SECONDS worst=0
  install_tools
  : > "$REPORT"
  for pkg in "${PACKAGES[@]}"; do
    local status=0
    build "$pkg" || status=$?
    # A failure other than the SDK outranks it.
    if [ "$status" -eq 1 ] || { [ "$status" -eq "$NEEDS_SDK" ] && [ "$worst" -eq 0 ]; }; then worst=$status; fi
  done
  step "done in $((SECONDS - started)) s; summary in $REPORT"
  cat "$REPORT"
  if [ "$worst" -eq "$NEEDS_SDK" ]; then
    echo "macOS: not linked here, for want of the macOS SDK's frameworks (exit $NEEDS_SDK); the release workflow builds on macOS runners"
  fi
  return "$worst"
}

main
