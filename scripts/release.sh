#!/usr/bin/env bash
# Release builds for the branch's hardware and the server, and their packages, in one command:
#   scripts/release.sh            # everything below, into target/packages/
#   scripts/release.sh aarch64    # some of them: server, x86_64, aarch64, armv7
# Installs its toolchain the first time (scripts/cross-deps.sh: Debian's cross compilers,
# musl-tools, qemu-user-static, rustup's targets, nfpm). Binaries are built with the `dist`
# profile (Cargo.toml: fat LTO, one codegen unit, panic = abort, stripped).
#
#   x86_64-unknown-linux-musl      static: mptd-V-x86_64-linux-musl.tar.gz, OpenWrt x86_64 .ipk, .apk
#   aarch64-unknown-linux-musl     static: mptd-V-aarch64-linux-musl.tar.gz, .deb arm64,
#                                  OpenWrt .ipk (aarch64_cortex-a53: MT7981/MT7986; aarch64_generic), .apk
#   armv7-unknown-linux-gnueabihf  glibc:  mptd-V-armv7-linux-gnueabihf.tar.gz, .deb armhf
#   x86_64-unknown-linux-gnu       glibc:  .deb amd64 ("server"; scripts/package.sh builds it alone)
#
# mipsel (MT7621) is not built: see docs/deploy.md, "Install on a router".
# Prints each binary's and each package's size.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/cross-deps.sh
want=" ${*:-server x86_64 aarch64 armv7} "
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
out=target/packages
mkdir -p "$out"
cargo run --release --quiet -p mpt-lab -- docs --out target/assets >/dev/null

# stage TRIPLE ARCH: the tree nfpm packs, in target/pkg/stage-ARCH
stage() {
  local triple=$1 arch=$2 dir=target/pkg/stage-$2 bin
  bin=target/$triple/dist
  [ "$triple" = host ] && bin=target/dist
  rm -rf "$dir"
  staged+=("$dir")
  mkdir -p "$dir"/usr/bin "$dir"/systemd "$dir"/doc/examples "$dir"/man/man5 "$dir"/man/man8 \
    "$dir"/completions/bash "$dir"/completions/zsh "$dir"/completions/fish "$dir"/openwrt
  cp "$bin"/mptd "$bin"/mptctl "$dir"/usr/bin/
  cp systemd/mptd@.service "$dir"/systemd/
  cp config/*.toml "$dir"/doc/examples/
  cp contrib/bird/concentrator.conf "$dir"/doc/examples/bird-concentrator.conf
  cp README.md CHANGELOG.md LICENSE-MIT LICENSE-APACHE "$dir"/doc/
  mkdir -p "$dir"/doc/docs/figures && cp docs/*.md "$dir"/doc/docs/
  # the README's picture and the results' plots, where the installed docs point
  cp docs/figures/* "$dir"/doc/docs/figures/
  # Debian's copyright file: the MIT licence (the package is MIT OR Apache-2.0)
  { echo "mptd: Copyright 2026, the mptd developers. MIT OR Apache-2.0."; echo; cat LICENSE-MIT; } \
    >"$dir"/doc/copyright
  for m in target/assets/man/*.5; do gzip -9n <"$m" >"$dir/man/man5/$(basename "$m").gz"; done
  for m in target/assets/man/*.8; do gzip -9n <"$m" >"$dir/man/man8/$(basename "$m").gz"; done
  cp target/assets/completions/mptd target/assets/completions/mptctl "$dir"/completions/bash/
  cp target/assets/completions/_mptd target/assets/completions/_mptctl "$dir"/completions/zsh/
  cp target/assets/completions/*.fish "$dir"/completions/fish/
  cp contrib/openwrt/mptd.init contrib/openwrt/mptd.config contrib/openwrt/keep.d \
    contrib/openwrt/postinst "$dir"/openwrt/
}

# the Debian dependencies of a glibc build, from its NEEDED entries
depends() {
  local f=$1 deps=() glibc
  if readelf -d "$f" | grep -q 'NEEDED.*libc\.so'; then
    glibc=$(objdump -T "$f" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -1)
    deps+=("\"libc6 (>= $glibc)\"")
  fi
  readelf -d "$f" | grep -q 'NEEDED.*libgcc_s' && deps+=('"libgcc-s1"')
  local IFS=,
  echo "${deps[*]}"
}

# package FORMAT STAGE IPK_ARCH FILE (the nfpm/Debian arch: the stage's name, less -musl)
package() {
  local fmt=$1 arch=${2%-musl} ipk=$3 file=$4 dir=target/pkg/stage-$2 deps
  deps=$(depends "$dir/usr/bin/mptd")
  sed -e "s/@ARCH@/$arch/; s/@VERSION@/$version/; s/@DEPENDS@/$deps/; s/@IPK_ARCH@/$ipk/" \
    contrib/nfpm.yaml >"$dir/nfpm.yaml"
  (cd "$dir" && "$NFPM" package -f nfpm.yaml -p "$fmt" -t "$OLDPWD/$out/$file" >/dev/null)
  echo "$out/$file"
}

tarball() {
  local name=$2 dir=target/pkg/stage-$1
  tar -C "$dir" --owner=0 --group=0 -czf "$out/mptd-$version-$name.tar.gz" usr/bin doc
  echo "$out/mptd-$version-$name.tar.gz"
}

made=() staged=()
build() {
  echo "release: building $1" >&2
  cargo build --profile dist -p mptd --bins --target "$1" --quiet
}
if [[ $want == *" server "* ]]; then
  echo "release: building x86_64-unknown-linux-gnu" >&2
  cargo build --profile dist -p mptd --bins --quiet
  stage host amd64
  made+=("$(package deb amd64 x86_64 "mptd_${version}-1_amd64.deb")")
fi
if [[ $want == *" x86_64 "* ]]; then
  build x86_64-unknown-linux-musl
  stage x86_64-unknown-linux-musl x86_64-musl
  made+=("$(tarball x86_64-musl x86_64-linux-musl)")
  made+=("$(package ipk x86_64-musl x86_64 "mptd_${version}-1_x86_64.ipk")")
  made+=("$(package apk x86_64-musl x86_64 "mptd-${version}-r1.x86_64.apk")")
fi
if [[ $want == *" aarch64 "* ]]; then
  build aarch64-unknown-linux-musl
  stage aarch64-unknown-linux-musl arm64
  made+=("$(tarball arm64 aarch64-linux-musl)")
  made+=("$(package deb arm64 aarch64 "mptd_${version}-1_arm64.deb")")
  for a in aarch64_cortex-a53 aarch64_generic; do
    made+=("$(package ipk arm64 "$a" "mptd_${version}-1_$a.ipk")")
  done
  made+=("$(package apk arm64 aarch64 "mptd-${version}-r1.aarch64.apk")")
fi
if [[ $want == *" armv7 "* ]]; then
  build armv7-unknown-linux-gnueabihf
  stage armv7-unknown-linux-gnueabihf armhf
  made+=("$(tarball armhf armv7-linux-gnueabihf)")
  made+=("$(package deb armhf armv7 "mptd_${version}-1_armhf.deb")")
fi

echo "== binaries (stripped), bytes"
for d in "${staged[@]}"; do
  a=${d##*stage-}
  m=$(stat -c %s "$d/usr/bin/mptd"); c=$(stat -c %s "$d/usr/bin/mptctl")
  printf '%-8s mptd %9d  mptctl %9d  together %9d  (%s)\n' "$a" "$m" "$c" $((m + c)) \
    "$(file -b "$d/usr/bin/mptd" | cut -d, -f1-2,5 | tr -s ' ')"
done
echo "== packages, bytes"
for f in "${made[@]}"; do printf '%9d  %s\n' "$(stat -c %s "$f")" "$f"; done
