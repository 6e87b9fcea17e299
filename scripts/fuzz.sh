#!/usr/bin/env bash
# Runs every cargo-fuzz target of crates/core/fuzz for a while each (docs/fuzzing.md).
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]    default: 30 seconds, every target
#
# Installs what it needs (the nightly toolchain, cargo-fuzz) when missing. Each target starts
# from its committed seeds (corpus/<target>/seed-*) and keeps what it finds in the same folder
# (ignored by git); a crash stops the run with the target's exit code and leaves its input in
# crates/core/fuzz/artifacts/<target>/. Not part of the default test command.
set -euo pipefail

seconds="${1:-30}"
shift || true
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root/crates/core"

if ! rustup toolchain list | grep -q '^nightly'; then
  rustup toolchain install nightly --profile minimal
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked
fi

if [ "$#" -gt 0 ]; then
  targets=("$@")
else
  mapfile -t targets < <(cargo +nightly fuzz list)
fi

cargo +nightly fuzz build
for target in "${targets[@]}"; do
  echo "== $target: ${seconds}s"
  mkdir -p "fuzz/corpus/$target"
  cargo +nightly fuzz run "$target" "fuzz/corpus/$target" -- -max_total_time="$seconds" -print_final_stats=1
done
