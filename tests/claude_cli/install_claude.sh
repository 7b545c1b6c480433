#!/usr/bin/env bash
# Install the pinned Claude Code CLI into a throw-away directory, outside the repository,
# for the tests that drive the real client (tests/test_claude_cli.py).
#
#   tests/claude_cli/install_claude.sh            # into /tmp/salon-claude-cli
#   SALON_CLAUDE_DIR=/opt/cc tests/claude_cli/install_claude.sh
#
# The npm package is a thin wrapper around a native binary shipped in a per-platform
# package; its postinstall step puts that binary in place of bin/claude.exe. Where npm
# skipped install scripts, the platform package's binary is linked by hand.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
version="${SALON_CLAUDE_VERSION:-$(tr -d '[:space:]' < "$here/claude-version.txt")}"
dir="${SALON_CLAUDE_DIR:-/tmp/salon-claude-cli}"
bin="$dir/node_modules/.bin/claude"

installed_version() {
    "$bin" --version 2>/dev/null | awk '{print $1}'
}

if [ -x "$bin" ] && [ "$(installed_version)" = "$version" ]; then
    echo "Claude Code $version already in $dir"
    exit 0
fi

mkdir -p "$dir"
npm install --prefix "$dir" --no-audit --no-fund --loglevel=error \
    "@anthropic-ai/claude-code@$version"

if [ "$(installed_version)" != "$version" ]; then
    # The postinstall step did not run: use the platform package's binary directly.
    case "$(uname -m)" in
        x86_64) arch=x64 ;;
        aarch64 | arm64) arch=arm64 ;;
        *) echo "no Claude Code build for $(uname -m)" >&2; exit 1 ;;
    esac
    native="$dir/node_modules/@anthropic-ai/claude-code-$(uname -s | tr A-Z a-z)-$arch/claude"
    ln -sf "$native" "$bin"
fi

if [ "$(installed_version)" != "$version" ]; then
    echo "installed Claude Code does not report version $version" >&2
    exit 1
fi
echo "Claude Code $version installed in $dir (SALON_CLAUDE_BIN=$bin)"
