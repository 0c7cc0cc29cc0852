#!/usr/bin/env bash
# Installs fabricd on a management node:
#   binaries      $PREFIX/bin/fabricd, $PREFIX/bin/fabricctl
#   unit          /etc/systemd/system/fabricd.service (ExecStart, Documentation= follow $PREFIX)
#   umad drop-in  /etc/systemd/system/fabricd.service.d/umad.conf (device access of the umad
#                 driver), /etc/modules-load.d/fabricd.conf (ib_umad), and
#                 /etc/udev/rules.d/90-fabricd-umad.rules (umadN/issmN owned by fabricd)
#   config        /etc/fabricd/fabricd.toml: the production config (umad driver, fault injection
#                 off; config/fabricd-production.toml) and /etc/fabricd/fabricd-sim.toml: the
#                 simulator config (mock driver, drills on; config/fabricd.toml). An existing file
#                 is never overwritten: the shipped one goes beside it as FILE.new.
#   state         /var/lib/fabricd (0750, fabricd:fabricd)
#   docs          $PREFIX/share/doc/fabricd/: README.md, docs/*.md, the configuration
#                 reference (fabricd.toml.reference), the Prometheus samples
#   completions   bash, zsh, fish (`fabricctl completions SHELL`); man pages (`fabricctl man`)
#   user, group   system user `fabricd` (no login), group `fabricd` (socket access: add operators)
#
# Usage: deploy/install.sh [--bin-dir DIR] [--prefix /usr] [--destdir DIR] [--no-user]
#                          [--no-systemctl] [--build]
#   --bin-dir DIR    where the built binaries are (default: target/release, or
#                    $CARGO_TARGET_DIR/release)
#   --build          run `cargo build --workspace --release --bins` first (the same build as
#                    tests/run-all.sh and deploy/run-sim.sh: no second dependency build)
#   --destdir DIR    stage everything under DIR (packaging, tests); implies --no-user and
#                    --no-systemctl, and skips ownership changes
#   --no-user        do not create the fabricd user and group
#   --no-systemctl   do not run systemctl daemon-reload
set -euo pipefail
cd "$(dirname "$0")/.."

bin_dir="${CARGO_TARGET_DIR:-target}/release"
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
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown option $1" >&2; exit 2 ;;
  esac
done

if [ "$build" = 1 ]; then
  cargo build --workspace --release --bins
fi
for b in fabricd fabricctl; do
  if [ ! -x "$bin_dir/$b" ]; then
    echo "install.sh: $bin_dir/$b not found (build with --build or point --bin-dir at it)" >&2
    exit 1
  fi
done
if [ -z "$destdir" ] && [ "$(id -u)" -ne 0 ]; then
  echo "install.sh: run as root (or use --destdir to stage)" >&2
  exit 1
fi

D="$destdir"
owner() { # owner USER:GROUP PATH...
  if [ -z "$destdir" ]; then chown "$@"; fi
}
# Paths inside the unit files follow --prefix.
prefixed() { sed -e "s|/usr/bin/fabricd|$prefix/bin/fabricd|g" -e "s|/usr/share/doc/fabricd|$prefix/share/doc/fabricd|g" "$1"; }

# Service user and socket group.
if [ "$make_user" = 1 ]; then
  getent group fabricd >/dev/null || groupadd --system fabricd
  getent passwd fabricd >/dev/null || useradd --system --gid fabricd --home-dir /var/lib/fabricd \
    --no-create-home --shell /usr/sbin/nologin --comment "fabricd fabric manager" fabricd
fi

# Binaries.
install -d -m 0755 "$D$prefix/bin"
install -m 0755 "$bin_dir/fabricd" "$D$prefix/bin/fabricd"
install -m 0755 "$bin_dir/fabricctl" "$D$prefix/bin/fabricctl"

# Configuration: never overwrite an operator's file.
install -d -m 0750 "$D/etc/fabricd"
owner root:fabricd "$D/etc/fabricd"
install_config() { # install_config SOURCE NAME
  local dst="$D/etc/fabricd/$2"
  if [ -e "$dst" ]; then
    install -m 0640 "$1" "$dst.new"
    owner root:fabricd "$dst.new"
    echo "install.sh: kept $dst; the shipped config is in $dst.new"
  else
    install -m 0640 "$1" "$dst"
    owner root:fabricd "$dst"
  fi
}
install_config config/fabricd-production.toml fabricd.toml
install_config config/fabricd.toml fabricd-sim.toml

# State directory (systemd's StateDirectory= also creates it).
install -d -m 0750 "$D/var/lib/fabricd"
owner fabricd:fabricd "$D/var/lib/fabricd"

# systemd unit and its drop-ins, pointing at the installed binary and docs.
install -d -m 0755 "$D/etc/systemd/system/fabricd.service.d"
prefixed systemd/fabricd.service > "$D/etc/systemd/system/fabricd.service"
chmod 0644 "$D/etc/systemd/system/fabricd.service"
for f in systemd/fabricd.service.d/*.conf; do
  prefixed "$f" > "$D/etc/systemd/system/fabricd.service.d/$(basename "$f")"
  chmod 0644 "$D/etc/systemd/system/fabricd.service.d/$(basename "$f")"
done
# The umad driver's module and device nodes.
install -d -m 0755 "$D/etc/modules-load.d" "$D/etc/udev/rules.d"
install -m 0644 deploy/modules-load.d/fabricd.conf "$D/etc/modules-load.d/fabricd.conf"
install -m 0644 deploy/udev/90-fabricd-umad.rules "$D/etc/udev/rules.d/90-fabricd-umad.rules"

# Documentation (every docs/*.md: operations.md links the others), the configuration
# reference and the Prometheus samples.
doc="$D$prefix/share/doc/fabricd"
install -d -m 0755 "$doc"
install -m 0644 README.md docs/*.md deploy/prometheus.yml deploy/prometheus-rules.yml "$doc/"
install -m 0644 config/fabricd.toml "$doc/fabricd.toml.reference"

# Shell completions and man pages, generated by the installed fabricctl.
ctl="$D$prefix/bin/fabricctl"
gen_failed() {
  echo "install.sh: '$ctl $1' failed: this fabricctl cannot generate $2" >&2
  exit 1
}
install -d -m 0755 "$D$prefix/share/bash-completion/completions" \
  "$D$prefix/share/zsh/vendor-completions" "$D$prefix/share/fish/vendor_completions.d" \
  "$D$prefix/share/man/man1"
"$ctl" completions bash > "$D$prefix/share/bash-completion/completions/fabricctl" \
  || gen_failed "completions bash" "shell completions"
"$ctl" completions zsh > "$D$prefix/share/zsh/vendor-completions/_fabricctl" \
  || gen_failed "completions zsh" "shell completions"
"$ctl" completions fish > "$D$prefix/share/fish/vendor_completions.d/fabricctl.fish" \
  || gen_failed "completions fish" "shell completions"
"$ctl" man --out-dir "$D$prefix/share/man/man1" || gen_failed "man --out-dir" "man pages"
ls "$D$prefix/share/man/man1"/fabricctl*.1 >/dev/null 2>&1 \
  || { echo "install.sh: fabricctl man wrote no fabricctl*.1 page" >&2; exit 1; }

# The installed configs must be valid. The production config names the umad device, which a
# machine without the HCA or without ib_umad loaded yet does not have: that alone is a warning.
check() { # check CONFIG
  local out
  if out=$("$D$prefix/bin/fabricd" --config "$1" --check-config 2>&1); then
    echo "$out"
  elif grep -q "driver.umad.device: cannot access" <<<"$out"; then
    echo "install.sh: warning: $out" >&2
    echo "install.sh: warning: load ib_umad (or fix driver.umad.device), then run: fabricd --config /etc/fabricd/fabricd.toml --check-config" >&2
  else
    echo "$out" >&2
    exit 1
  fi
}
for c in "$D/etc/fabricd/fabricd.toml" "$D/etc/fabricd/fabricd-sim.toml"; do
  check "$c"
done

if [ "$run_systemctl" = 1 ] && command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
  systemctl daemon-reload
fi

cat <<MSG
fabricd installed under ${D:-/}.
Next steps:
  - check the production config (umad driver, device, SM priority; fault injection is off):
      fabricd --config /etc/fabricd/fabricd.toml --check-config
    (/etc/fabricd/fabricd-sim.toml runs the simulated fabric: the mock driver, drills on)
  - mock or oob driver: remove /etc/systemd/system/fabricd.service.d/umad.conf
  - add operators to the fabricd group:  usermod -aG fabricd <user>
  - start:   systemctl enable --now fabricd
  - check:   fabricctl status    (socket /run/fabricd/fabricd.sock)
MSG
