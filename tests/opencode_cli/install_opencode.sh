#!/usr/bin/env bash
# Install the pinned OpenCode into a throw-away directory, outside the repository, for
# the tests that drive the real client (tests/test_opencode_cli.py).
#
#   tests/opencode_cli/install_opencode.sh            # into /tmp/salon-opencode-cli
#   SALON_OPENCODE_DIR=/opt/opencode tests/opencode_cli/install_opencode.sh
#
# The npm package is a wrapper; the native binary comes in a per-platform package that
# npm installs beside it. OpenCode also installs its plugin package (@opencode-ai/plugin,
# the same version) into each configuration directory at start, from the registry: it
# is installed here once, into config/, and the tests link it into each HOME they make,
# so that a run stays on loopback.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
version="${SALON_OPENCODE_VERSION:-$(tr -d '[:space:]' < "$here/opencode-version.txt")}"
dir="${SALON_OPENCODE_DIR:-/tmp/salon-opencode-cli}"
bin="$dir/node_modules/.bin/opencode"
config="$dir/config"

installed_version() {
    local home
    home="$(mktemp -d)"
    HOME="$home" "$bin" --version 2>/dev/null | tail -n 1
    rm -rf "$home"
}

if [ ! -x "$bin" ] || [ "$(installed_version)" != "$version" ]; then
    mkdir -p "$dir"
    npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "opencode-ai@$version"
fi
if [ "$(installed_version)" != "$version" ]; then
    echo "installed OpenCode does not report version $version (is the platform package" \
        "for $(uname -s) $(uname -m) missing?)" >&2
    exit 1
fi
if [ ! -d "$config/node_modules/@opencode-ai/plugin" ]; then
    mkdir -p "$config"
    printf '{\n  "dependencies": {\n    "@opencode-ai/plugin": "%s"\n  }\n}\n' "$version" \
        > "$config/package.json"
    npm install --prefix "$config" --no-audit --no-fund --loglevel=error
fi
echo "OpenCode $version installed in $dir (SALON_OPENCODE_BIN=$bin)"
