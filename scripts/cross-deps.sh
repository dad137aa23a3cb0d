#!/usr/bin/env bash
# What the release builds, the packages and the foreign-architecture tests need, installed
# the first time (root for apt): Debian's cross compilers (ring's C and assembly, and the
# linker), musl-tools (musl-gcc for the x86_64 static build), qemu-user-static (runs the
# aarch64 and armv7 builds here), shellcheck (the OpenWrt init script), debootstrap (the arm64
# tree); rustup's targets; nfpm (the packager, from the Go module proxy; Debian has none).
# Sourced by scripts/release.sh, scripts/package.sh and the tests.
set -euo pipefail
NFPM_VERSION=v2.48.0
need=()
for pair in aarch64-linux-gnu-gcc:gcc-aarch64-linux-gnu arm-linux-gnueabihf-gcc:gcc-arm-linux-gnueabihf \
  musl-gcc:musl-tools qemu-aarch64-static:qemu-user-static shellcheck:shellcheck \
  debootstrap:debootstrap x86_64-linux-gnu-gcc:gcc; do
  cmd=${pair%%:*}; pkg=${pair##*:}
  command -v "$cmd" >/dev/null 2>&1 || [ -x "/usr/sbin/$cmd" ] || need+=("$pkg")
done
# the armhf and arm64 C libraries, for qemu's -L (the glibc builds' tests)
[ -e /usr/arm-linux-gnueabihf/lib/libc.so.6 ] || need+=(libc6-armhf-cross)
[ -e /usr/aarch64-linux-gnu/lib/libc.so.6 ] || need+=(libc6-arm64-cross)
# and their headers, which ring's C needs (a cross gcc only recommends them)
[ -e /usr/arm-linux-gnueabihf/include/stdint.h ] || need+=(libc6-dev-armhf-cross)
[ -e /usr/aarch64-linux-gnu/include/stdint.h ] || need+=(libc6-dev-arm64-cross)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "missing packages: ${need[*]} (run as root to install them)" >&2
    exit 1
  fi
  echo "installing: ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
if ! command -v cargo >/dev/null 2>&1; then
  [ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
fi
installed=$(rustup target list --installed)
for t in x86_64-unknown-linux-musl aarch64-unknown-linux-musl armv7-unknown-linux-gnueabihf; do
  grep -qx "$t" <<<"$installed" || rustup target add "$t" >&2
done
# nfpm: built once from the Go module proxy into Go's bin directory
if ! command -v go >/dev/null 2>&1; then
  if [ -x /usr/local/go/bin/go ]; then
    export PATH="$PATH:/usr/local/go/bin"
  else
    echo "installing: golang-go" >&2
    apt-get install -y -qq --no-install-recommends golang-go >/dev/null
  fi
fi
NFPM="$(go env GOPATH)/nfpm-$NFPM_VERSION/nfpm"
if ! [ -x "$NFPM" ]; then
  echo "installing: nfpm $NFPM_VERSION (go install)" >&2
  GOBIN="${NFPM%/nfpm}" go install "github.com/goreleaser/nfpm/v2/cmd/nfpm@$NFPM_VERSION" >&2
fi
export NFPM
