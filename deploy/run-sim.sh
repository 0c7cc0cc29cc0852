#!/usr/bin/env bash
# Runs fabricd in the foreground on its built-in simulated fabric (the `mock` driver with the
# default config: a 648-node two-level fat-tree), with its socket and state under /tmp.
# In another terminal:
#   cargo run --release -p fabricctl -- --socket /tmp/fabricd-sim/fabricd.sock status
#   cargo run --release -p fabricctl -- --socket /tmp/fabricd-sim/fabricd.sock inject link-down --switch <GUID|NAME> --port <N>
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v protoc >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq protobuf-compiler >/dev/null
fi
dir=/tmp/fabricd-sim
mkdir -p "$dir/state"
exec cargo run --release -p fabricd -- --config config/fabricd.toml \
  --state-dir "$dir/state" --socket "$dir/fabricd.sock" "$@"
