"""Driving the real Claude Code CLI offline: a stand-in model and a HOME of its own.

* `install_claude.sh` puts the pinned version (claude-version.txt) in a throw-away
  directory, /tmp/salon-claude-cli unless SALON_CLAUDE_DIR says otherwise; the tests
  find it there or through SALON_CLAUDE_BIN, and skip without it.
* `standin.py` answers Claude Code's Messages API calls from a script and records them.
* `harness.py` makes the HOME, runs `claude -p`, interactive sessions under tmux, local
  plugins, and (offline) opens the channel gate.
* FINDINGS.md: what Claude Code was seen to do, and how it was seen.

    tests/claude_cli/install_claude.sh && pytest tests/test_claude_cli.py
"""
