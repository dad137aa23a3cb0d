#!/usr/bin/env bash
# Installs what the demo and the tests need on a fresh Debian machine (run as root):
# iproute2 (ip, tc, ss), iperf3, vsftpd, curl, lftp, ping, nftables, conntrack, systemd-analyze (to check the unit), man-db and dpkg (to check the package), debootstrap and systemd-container (to boot Debian's systemd in a container and install the package there), promtool (prometheus, to check the metrics), bird (bird2, the BGP speaker of the concentrators test), tcpdump (the TLS test's capture), chromium (the status page's test drives it headless with playwright-core, which it installs with npm: it needs node 20 or later and npm, Debian 13's or NodeSource's on Debian 12). Rust comes
# from rustup.
set -euo pipefail
need=()
for pair in ip:iproute2 tc:iproute2 ss:iproute2 iperf3:iperf3 vsftpd:vsftpd curl:curl lftp:lftp ping:iputils-ping nft:nftables conntrack:conntrack sha256sum:coreutils gnuplot:gnuplot-nox systemd-analyze:systemd man:man-db dpkg-deb:dpkg promtool:prometheus debootstrap:debootstrap systemd-nspawn:systemd-container nsenter:util-linux bird:bird2 tcpdump:tcpdump chromium:chromium; do
  cmd=${pair%%:*}; pkg=${pair##*:}
  command -v "$cmd" >/dev/null 2>&1 || [ -x "/usr/sbin/$cmd" ] || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "missing packages: ${need[*]} (run as root to install them)" >&2
    exit 1
  fi
  echo "installing: ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
# vsftpd's package starts a system instance on port 21; the tests run their own.
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet vsftpd 2>/dev/null; then
  systemctl stop vsftpd || true
fi
# bird2's package starts a system instance; the tests run their own, in namespaces.
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet bird 2>/dev/null; then
  systemctl stop bird || true
fi
if ! command -v cargo >/dev/null 2>&1; then
  [ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
fi
command -v cargo >/dev/null 2>&1 || { echo "cargo not found: install Rust with rustup" >&2; exit 1; }
modprobe tun 2>/dev/null || true
