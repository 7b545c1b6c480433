#!/usr/bin/env bash
# Install the pinned Gemini CLI into a throw-away directory, outside the repository, for
# the tests that drive the real client (tests/test_gemini_cli.py).
#
#   tests/gemini_cli/install_gemini.sh            # into /tmp/salon-gemini-cli
#   SALON_GEMINI_DIR=/opt/gemini tests/gemini_cli/install_gemini.sh
#
# The npm package is plain JavaScript (Node 20 runs it); bin/gemini is its script.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
version="${SALON_GEMINI_VERSION:-$(tr -d '[:space:]' < "$here/gemini-version.txt")}"
dir="${SALON_GEMINI_DIR:-/tmp/salon-gemini-cli}"
bin="$dir/node_modules/.bin/gemini"

installed_version() {
    # "0.61.0"; with a HOME of its own, so that nothing of the user's is read or written
    local home
    home="$(mktemp -d)"
    HOME="$home" "$bin" --version 2>/dev/null | tail -n 1
    rm -rf "$home"
}

if [ -x "$bin" ] && [ "$(installed_version)" = "$version" ]; then
    echo "Gemini CLI $version already in $dir"
    exit 0
fi

mkdir -p "$dir"
npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "@google/gemini-cli@$version"

if [ "$(installed_version)" != "$version" ]; then
    echo "installed Gemini CLI does not report version $version" >&2
    exit 1
fi
echo "Gemini CLI $version installed in $dir (SALON_GEMINI_BIN=$bin)"
