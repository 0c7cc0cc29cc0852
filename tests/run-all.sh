#!/usr/bin/env bash
# Runs every test of the project on a fresh Debian machine: installs the system packages the
# tests need (the InfiniBand simulator and diagnostics, OpenSM for comparisons, python3 for the
# OpenSM comparison script, systemd's systemd-analyze for the install test, Slurm's slurmctld
# for the topology export, headless chromium + chromedriver for the dashboard, etcd for the
# high-availability tests, protoc for the etcd client crate's build; fabricd's own gRPC code
# needs no protoc: protox compiles its .proto files), builds the release binaries (the ones
# deploy/run-sim.sh, deploy/install.sh and the README use: one build, the same command), then
# builds and runs the whole workspace test suite, then rustfmt and clippy (whole runs only).
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v ibsim >/dev/null 2>&1 || need+=(ibsim-utils)
command -v ibnetdiscover >/dev/null 2>&1 || need+=(infiniband-diags)
command -v opensm >/dev/null 2>&1 || need+=(opensm)
command -v systemd-analyze >/dev/null 2>&1 || need+=(systemd)
command -v python3 >/dev/null 2>&1 || need+=(python3)
command -v slurmctld >/dev/null 2>&1 || need+=(slurmctld slurm-client)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v chromedriver >/dev/null 2>&1 || need+=(chromium-driver)
command -v etcd >/dev/null 2>&1 || need+=(etcd-server)
command -v protoc >/dev/null 2>&1 || need+=(protobuf-compiler)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

# A clean clone builds once: incremental compilation state would only cost disk (2.6 GB here).
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
# Free disk before and after, so that a CI log shows it if the build ever runs out of it.
df -h . | sed 's/^/disk: /'
status=0
# The release binaries of deploy/run-sim.sh, deploy/install.sh and the README: exactly this
# command, so that they start without a second dependency build (whole runs only).
if [ $# -eq 0 ]; then
  cargo build --workspace --release --bins || status=$?
fi
cargo test --workspace --no-fail-fast "$@" || status=$?
# The lints are part of the suite (docs/ARCHITECTURE.md states invariants that only the lints
# check: unsafe code, the clippy set of the workspace): a whole run (no filter) checks them too.
if [ $# -eq 0 ]; then
  for c in rustfmt clippy; do
    rustup component list --installed 2>/dev/null | grep -q "^$c" || rustup component add "$c" || echo "cannot install $c"
  done
  cargo fmt --all --check || { echo "FAILED: cargo fmt --all --check"; status=1; }
  cargo clippy --workspace --all-targets -- -D warnings || { echo "FAILED: cargo clippy"; status=1; }
fi
df -h . | sed 's/^/disk: /'
du -sh "${CARGO_TARGET_DIR:-target}" 2>/dev/null | sed 's/^/disk: target dir /' || true
exit $status
