# Sourced by scripts/build-linux.sh and scripts/build-macos.sh: the cross-build tools both use,
# zig (PyPI's ziglang, in a venv) and cargo-zigbuild (crates.io), installed once under
# $ZIG_TOOLS_DIR (default target/zig-tools) and put on PATH. Needs python3 with venv and cargo.

ZIG_VERSION=0.15.2            # as rolldown releases with
CARGO_ZIGBUILD_VERSION=0.24.1

install_zig_tools() {
  local dir=${ZIG_TOOLS_DIR:-$ROOT/target/zig-tools}
  mkdir -p "$dir/bin"
  if [ ! -x "$dir/venv/bin/python" ] || ! "$dir/venv/bin/python" -m ziglang version 2>/dev/null | grep -qx "$ZIG_VERSION"; then
    printf '\n== %s\n' "ziglang $ZIG_VERSION from PyPI"
    python3 -m venv "$dir/venv"
    "$dir/venv/bin/pip" install -q "ziglang==$ZIG_VERSION"
  fi
  # cargo-zigbuild and `napi build -x` look for `zig` on PATH.
  printf '#!/bin/sh\nexec "%s" -m ziglang "$@"\n' "$dir/venv/bin/python" > "$dir/bin/zig"
  chmod +x "$dir/bin/zig"
  if ! "$dir/tools/bin/cargo-zigbuild" --version 2>/dev/null | grep -q "$CARGO_ZIGBUILD_VERSION"; then
    printf '\n== %s\n' "cargo-zigbuild $CARGO_ZIGBUILD_VERSION from crates.io"
    nice -n 19 cargo install --quiet --locked --root "$dir/tools" --version "$CARGO_ZIGBUILD_VERSION" cargo-zigbuild
  fi
  export PATH="$dir/bin:$dir/tools/bin:$PATH"
}
