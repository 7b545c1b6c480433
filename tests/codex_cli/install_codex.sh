#!/usr/bin/env bash
# Install the pinned Codex CLI into a throw-away directory, outside the repository, for
# the tests that drive the real client (tests/test_codex_cli.py).
#
#   tests/codex_cli/install_codex.sh            # into /tmp/salon-codex-cli
#   SALON_CODEX_DIR=/opt/codex tests/codex_cli/install_codex.sh
#
# The npm package is a small Node wrapper; the native binary comes in a per-platform
# package (@openai/codex-linux-x64, …) that npm installs beside it as an optional
# dependency. The wrapper finds it there, so bin/codex works once both are in.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
version="${SALON_CODEX_VERSION:-$(tr -d '[:space:]' < "$here/codex-version.txt")}"
dir="${SALON_CODEX_DIR:-/tmp/salon-codex-cli}"
bin="$dir/node_modules/.bin/codex"

installed_version() {
    # "codex-cli 0.171.0"
    "$bin" --version 2>/dev/null | awk '{print $2}'
}

if [ -x "$bin" ] && [ "$(installed_version)" = "$version" ]; then
    echo "Codex CLI $version already in $dir"
    exit 0
fi

mkdir -p "$dir"
npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "@openai/codex@$version"

if [ "$(installed_version)" != "$version" ]; then
    echo "installed Codex CLI does not report version $version (is the platform package" \
        "for $(uname -s) $(uname -m) missing?)" >&2
    exit 1
fi
echo "Codex CLI $version installed in $dir (SALON_CODEX_BIN=$bin)"
