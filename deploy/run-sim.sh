#!/usr/bin/env bash
# Runs fabricd in the foreground on its built-in simulated fabric (the `mock` driver with the
# default config: a 648-node two-level fat-tree), with its socket and state in a private
# directory of the user, ~/.local/state/fabricd-sim (mode 0700: a fixed /tmp path could be
# created first by another user, who would then control the socket and the state).
# In another terminal:
#   cargo run --release -p fabricctl -- --socket ~/.local/state/fabricd-sim/fabricd.sock status
#   cargo run --release -p fabricctl -- --socket ~/.local/state/fabricd-sim/fabricd.sock inject link-down --switch <GUID|NAME> --port <N>
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v protoc >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq protobuf-compiler >/dev/null
fi
dir="$HOME/.local/state/fabricd-sim"
mkdir -p "$dir"
if [ -L "$dir" ] || [ ! -O "$dir" ]; then
  echo "run-sim: $dir is not a directory of $(id -un): refusing to use it" >&2
  exit 1
fi
chmod 0700 "$dir"
mkdir -p -m 0750 "$dir/state"
exec cargo run --release -p fabricd -- --config config/fabricd.toml \
  --state-dir "$dir/state" --socket "$dir/fabricd.sock" "$@"
