"""The OpenCode plugin `salon install --client opencode` writes for a project: the way
OpenCode's sessions are told, since OpenCode runs no hook command of its own.

The plugin runs `salon hook KIND --client opencode` (the commands are written into the
file, as install writes Claude Code's hooks) with Claude Code's hook JSON on stdin, and
does what the answer says:

* `chat.message`: the first message of a session in this OpenCode process runs
  session-start, every later one prompt-submit; their context is added to the message
  as a synthetic part, which the model reads with it.
* `tool.execute.after`: prompt-submit again; what it tells is added to the tool's
  result, so a claim written during a turn is told within it.
* `session.idle`, in a process that goes on after the turn (`opencode serve`, the
  terminal client; not `opencode run`, which ends there): stop; its reason starts one
  more turn (`client.session.promptAsync`), and the next idle says `stop_hook_active`.
* `tool.execute.before`: on `write`, `edit` and `apply_patch`, pre-edit: a refusal is
  thrown, and the model gets its reason as the tool's error. On the salon tools, the
  session's id is added to the arguments (mcpgate.stdio.SESSION_ARGUMENT): OpenCode
  gives its MCP servers no session.
* the process's exit: session-end for each session it told.

A hook that fails or times out says nothing (the turn goes on), as in Claude Code.
"""

from __future__ import annotations

import json

from mcpgate.stdio import SESSION_ARGUMENT

HOOK_TIMEOUT_MS = 10_000

SOURCE = r"""// agent-salon for OpenCode: written by `salon install --client opencode`, removed by
// `salon uninstall --client opencode`. Tells this project's sessions of what the bus
// owes them, and holds back an edit of a file another session claims.
import { spawn, spawnSync } from "node:child_process";

const COMMANDS = __COMMANDS__;
const SESSION_ARGUMENT = __SESSION_ARGUMENT__;
const TIMEOUT_MS = __TIMEOUT_MS__;
const EDIT_TOOLS = new Set(["write", "edit", "apply_patch"]);
const TOOL_PREFIX = "salon_";
// `opencode run` ends when its session goes idle: a turn started then would be lost.
const ENDS_AT_IDLE = process.argv[2] === "run";

function hook(kind, payload) {
  return new Promise((resolve) => {
    let out = "";
    let child;
    try {
      child = spawn("/bin/sh", ["-c", COMMANDS[kind]], { stdio: ["pipe", "pipe", "ignore"] });
    } catch {
      return resolve(null);
    }
    const timer = setTimeout(() => child.kill("SIGKILL"), TIMEOUT_MS);
    child.stdout.on("data", (chunk) => (out += chunk));
    child.on("error", () => resolve(null));
    child.on("close", () => {
      clearTimeout(timer);
      try {
        resolve(out.trim() ? JSON.parse(out) : null);
      } catch {
        resolve(null);
      }
    });
    child.stdin.on("error", () => {});
    child.stdin.end(JSON.stringify(payload));
  });
}

function context(answer) {
  const said = answer && answer.hookSpecificOutput;
  return said && typeof said.additionalContext === "string" ? said.additionalContext : "";
}

export const AgentSalon = async ({ client, directory }) => {
  const told = new Set(); // sessions this process has run session-start for
  const held = new Set(); // sessions whose current turn a stop hook started
  const input = (sessionID, event, more) => ({
    session_id: sessionID, cwd: directory, hook_event_name: event, ...more,
  });
  process.on("exit", () => {
    for (const sessionID of told) {
      spawnSync("/bin/sh", ["-c", COMMANDS["session-end"]], {
        input: JSON.stringify(input(sessionID, "SessionEnd", { reason: "exit" })),
        stdio: ["pipe", "ignore", "ignore"], timeout: TIMEOUT_MS,
      });
    }
  });
  return {
    "chat.message": async ({ sessionID }, output) => {
      const first = !told.has(sessionID);
      told.add(sessionID);
      const prompt = output.parts.filter((p) => p.type === "text").map((p) => p.text).join("\n");
      const answer = await hook(first ? "session-start" : "prompt-submit",
        input(sessionID, first ? "SessionStart" : "UserPromptSubmit",
              first ? { source: "startup" } : { prompt }));
      const text = context(answer);
      const [part] = output.parts;
      if (text && part) output.parts.push({ ...part, id: part.id + "s", text, synthetic: true });
    },
    "tool.execute.before": async ({ tool, sessionID }, output) => {
      if (tool.startsWith(TOOL_PREFIX)) {
        output.args[SESSION_ARGUMENT] = sessionID;
        return;
      }
      if (!EDIT_TOOLS.has(tool)) return;
      const answer = await hook("pre-edit",
        input(sessionID, "PreToolUse", { tool_name: tool, tool_input: output.args }));
      const said = answer && answer.hookSpecificOutput;
      if (said && said.permissionDecision === "deny") {
        throw new Error(said.permissionDecisionReason || "held back by agent-salon");
      }
    },
    "tool.execute.after": async ({ tool, sessionID }, output) => {
      if (!told.has(sessionID) || tool.startsWith(TOOL_PREFIX)) return;
      const text = context(await hook("prompt-submit",
        input(sessionID, "PostToolUse", { prompt: "" })));
      if (text) output.output = `${output.output ?? ""}\n\n${text}`;
    },
    event: async ({ event }) => {
      if (event.type !== "session.idle" || ENDS_AT_IDLE) return;
      const sessionID = event.properties.sessionID;
      if (!told.has(sessionID)) return;
      const answer = await hook("stop",
        input(sessionID, "Stop", { stop_hook_active: held.has(sessionID) }));
      if (answer && answer.decision === "block" && answer.reason) {
        held.add(sessionID);
        await client.session.promptAsync({
          path: { id: sessionID }, body: { parts: [{ type: "text", text: answer.reason }] },
        });
      } else {
        held.delete(sessionID);
      }
    },
  };
};
"""


def source(commands: dict[str, str]) -> bytes:
    """The plugin's text, with the hook command of each kind."""
    return (
        SOURCE.replace("__COMMANDS__", json.dumps(commands, indent=2, sort_keys=True))
        .replace("__SESSION_ARGUMENT__", json.dumps(SESSION_ARGUMENT))
        .replace("__TIMEOUT_MS__", str(HOOK_TIMEOUT_MS))
        .encode()
    )
