#!/usr/bin/env bash
# portkit-dump against candle-core 0.11.0 (its Cargo.lock) and the newest 0.11.x on crates.io:
# a copy of the crate, `cargo update -p candle-core` (the newest release its "0.11" requirement
# allows), then its tests. Needs the network, and builds candle-core once more (minutes): not
# part of `make test`. Usage: native/portkit-dump/check-candle-versions.sh  (or `make dump-compat`)
set -euo pipefail
crate="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
target="${CARGO_TARGET_DIR:-$HOME/.cache/portkit/target}"

locked() { grep -A1 '^name = "candle-core"' "$1/Cargo.lock" | sed -n 's/^version = "\(.*\)"/\1/p'; }

echo "candle-core $(locked "$crate") (Cargo.lock):"
(cd "$crate" && CARGO_TARGET_DIR="$target" cargo test --release --quiet --lib)

cp -r "$crate/Cargo.toml" "$crate/Cargo.lock" "$crate/src" "$work/"
(cd "$work" && cargo update --quiet -p candle-core)
echo "candle-core $(locked "$work") (the newest 0.11.x):"
(cd "$work" && CARGO_TARGET_DIR="$target-compat" cargo test --release --quiet --lib)
