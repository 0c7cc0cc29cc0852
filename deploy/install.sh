#!/usr/bin/env bash
# Installs fabricd on a management node:
#   binaries      $PREFIX/bin/fabricd, $PREFIX/bin/fabricctl
#   unit          /etc/systemd/system/fabricd.service (ExecStart adjusted to $PREFIX)
#   config        /etc/fabricd/fabricd.toml (kept if present; the new one goes to fabricd.toml.new)
#   state         /var/lib/fabricd (0750, fabricd:fabricd)
#   docs          $PREFIX/share/doc/fabricd/
#   user, group   system user `fabricd` (no login), group `fabricd` (socket access: add operators)
#
# Usage: deploy/install.sh [--bin-dir DIR] [--prefix /usr] [--destdir DIR] [--no-user]
#                          [--no-systemctl] [--build]
#   --bin-dir DIR    where the built binaries are (default: target/release)
#   --build          run `cargo build --release -p fabricd -p fabricctl` first
#   --destdir DIR    stage everything under DIR (packaging, tests); implies --no-user and
#                    --no-systemctl, and skips ownership changes
#   --no-user        do not create the fabricd user and group
#   --no-systemctl   do not run systemctl daemon-reload
set -euo pipefail
cd "$(dirname "$0")/.."

bin_dir=target/release
prefix=/usr
destdir=""
make_user=1
run_systemctl=1
build=0
while [ $# -gt 0 ]; do
  case "$1" in
    --bin-dir) bin_dir="$2"; shift 2 ;;
    --prefix) prefix="$2"; shift 2 ;;
    --destdir) destdir="$2"; make_user=0; run_systemctl=0; shift 2 ;;
    --no-user) make_user=0; shift ;;
    --no-systemctl) run_systemctl=0; shift ;;
    --build) build=1; shift ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown option $1" >&2; exit 2 ;;
  esac
done

if [ "$build" = 1 ]; then
  cargo build --release -p fabricd -p fabricctl
fi
if [ ! -x "$bin_dir/fabricd" ]; then
  echo "install.sh: $bin_dir/fabricd not found (build with --build or point --bin-dir at it)" >&2
  exit 1
fi
if [ -z "$destdir" ] && [ "$(id -u)" -ne 0 ]; then
  echo "install.sh: run as root (or use --destdir to stage)" >&2
  exit 1
fi

D="$destdir"
owner() { # owner USER:GROUP PATH...
  if [ -z "$destdir" ]; then chown "$@"; fi
}

# Service user and socket group.
if [ "$make_user" = 1 ]; then
  getent group fabricd >/dev/null || groupadd --system fabricd
  getent passwd fabricd >/dev/null || useradd --system --gid fabricd --home-dir /var/lib/fabricd \
    --no-create-home --shell /usr/sbin/nologin --comment "fabricd fabric manager" fabricd
fi

# Binaries.
install -d -m 0755 "$D$prefix/bin"
install -m 0755 "$bin_dir/fabricd" "$D$prefix/bin/fabricd"
if [ -x "$bin_dir/fabricctl" ]; then
  install -m 0755 "$bin_dir/fabricctl" "$D$prefix/bin/fabricctl"
else
  echo "install.sh: warning: $bin_dir/fabricctl not found; installing fabricd only" >&2
fi

# Configuration: never overwrite an operator's file.
install -d -m 0750 "$D/etc/fabricd"
owner root:fabricd "$D/etc/fabricd"
cfg="$D/etc/fabricd/fabricd.toml"
if [ -e "$cfg" ]; then
  install -m 0640 config/fabricd.toml "$cfg.new"
  owner root:fabricd "$cfg.new"
  echo "install.sh: kept $cfg; the shipped config is in $cfg.new"
else
  install -m 0640 config/fabricd.toml "$cfg"
  owner root:fabricd "$cfg"
fi

# State directory (systemd's StateDirectory= also creates it).
install -d -m 0750 "$D/var/lib/fabricd"
owner fabricd:fabricd "$D/var/lib/fabricd"

# systemd unit, pointing at the installed binary.
install -d -m 0755 "$D/etc/systemd/system"
sed "s|/usr/bin/fabricd|$prefix/bin/fabricd|g" systemd/fabricd.service > "$D/etc/systemd/system/fabricd.service"
chmod 0644 "$D/etc/systemd/system/fabricd.service"

# Documentation and the Prometheus samples.
install -d -m 0755 "$D$prefix/share/doc/fabricd"
for f in README.md docs/operations.md docs/grpc-api.md deploy/prometheus.yml deploy/prometheus-rules.yml; do
  if [ -e "$f" ]; then install -m 0644 "$f" "$D$prefix/share/doc/fabricd/"; fi
done

# The installed config must be valid.
"$D$prefix/bin/fabricd" --config "$cfg" --check-config

if [ "$run_systemctl" = 1 ] && command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
  systemctl daemon-reload
fi

cat <<MSG
fabricd installed under ${D:-/}.
Next steps:
  - edit /etc/fabricd/fabricd.toml (driver, fault injection, Prometheus) and check it:
      fabricd --config /etc/fabricd/fabricd.toml --check-config
  - add operators to the fabricd group:  usermod -aG fabricd <user>
  - start:   systemctl enable --now fabricd
  - check:   fabricctl status    (socket /run/fabricd/fabricd.sock)
MSG
