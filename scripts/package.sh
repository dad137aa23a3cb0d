#!/usr/bin/env bash
# Builds the server's Debian package, target/packages/mptd_<version>-1_amd64.deb: mptd and
# mptctl (the `dist` profile: no debug info, stripped), the systemd unit, example configs,
# docs, man pages and shell completions (made by `mpt-lab docs` from the code and docs of
# this tree), packed by nfpm from contrib/nfpm.yaml. It is `scripts/release.sh server`, which
# installs nfpm the first time; that script builds the other architectures' packages too.
# Prints the package's path.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/release.sh server >&2
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
echo "target/packages/mptd_${version}-1_amd64.deb"
