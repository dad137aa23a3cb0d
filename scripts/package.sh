#!/usr/bin/env bash
# Builds the Debian package target/debian/mptd_<version>-1_<arch>.deb: mptd and mptctl (built
# with the `dist` profile: no debug info, stripped), the systemd unit, example configs, docs,
# man pages and shell completions (made by `mpt-lab docs` from the code and README of this
# tree). Installs cargo-deb first if it is missing. Prints the package's path.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! cargo deb --version >/dev/null 2>&1; then
  echo "package.sh: installing cargo-deb" >&2
  cargo install cargo-deb --locked --quiet
fi
cargo build --profile dist -p mptd --bins --quiet
cargo run --release --quiet -p mpt-lab -- docs --out target/assets >/dev/null
cargo deb -p mptd --profile dist --no-build --quiet >/dev/null
ls -t target/debian/mptd_*.deb | head -1
