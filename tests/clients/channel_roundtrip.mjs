// A channel round trip through agent-salon's /mcp endpoint, driven by the official
// MCP TypeScript SDK (the client Claude Code is built on).
//
//   node channel_roundtrip.mjs http://127.0.0.1:9315
//
// Session B (label beta) listens on its GET stream for `notifications/claude/channel`;
// session A (label alpha) writes to it. Claims checked, in order:
//   1. tools/list has `send`; salon_status names each session's seat.
//   2. A QUESTION from A `to` B's seat is pushed to B: content = the text, every meta
//      value a string, keys [A-Za-z_][A-Za-z0-9_]*, source = A's seat, type = QUESTION.
//   3. A broadcast FACT from A is not pushed to B (waited ~1.5 s), and a QUESTION sent
//      right after it is (the stream is still alive, so the silence meant something).
//   4. Once B is quiet, a QUESTION to B is not pushed, but it is in B's inbox.
//   5. An unlabeled session C may not send: JSON-RPC error -32602.
//   6. B got exactly the two pushes of 2. and 3. (nothing leaked late).
// Prints one JSON line ({"ok": true, ...}) and exits 0; on failure prints
// {"ok": false, "step": ..., "error": ...}, a message on stderr, and exits 1.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { z } from "zod";

const CHANNEL = "notifications/claude/channel";
const SILENCE_MS = 1500;
const PUSH_TIMEOUT_MS = 10_000;
const OVERALL_TIMEOUT_MS = 60_000;
const META_KEY = /^[A-Za-z_][A-Za-z0-9_]*$/;

// Loose on purpose: the checks below report a bad meta precisely instead of the SDK
// silently failing to parse it.
const ChannelNotificationSchema = z.object({
  method: z.literal(CHANNEL),
  params: z.looseObject({}).optional(),
});

let step = "start";
const clients = [];
const errors = [];

class Failure extends Error {}

function fail(message) {
  throw new Failure(message);
}

function finish(code, summary) {
  process.stdout.write(JSON.stringify(summary) + "\n");
  if (code !== 0) {
    process.stderr.write(`channel_roundtrip FAILED at step "${summary.step}": ${summary.error}\n`);
  }
  process.exit(code);
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

const watchdog = setTimeout(() => {
  finish(2, { ok: false, step, error: `no progress for ${OVERALL_TIMEOUT_MS} ms`, errors });
}, OVERALL_TIMEOUT_MS);

async function connect(baseUrl, label) {
  const url = new URL("/mcp", baseUrl);
  if (label) url.searchParams.set("label", label);
  const client = new Client({ name: `channel-roundtrip-${label ?? "anon"}`, version: "1.0.0" });
  client.onerror = (err) => errors.push(`${label ?? "anon"}: ${err?.message ?? err}`);
  const transport = new StreamableHTTPClientTransport(url);
  await client.connect(transport);
  clients.push(client);
  return { client, transport, label };
}

function payload(result) {
  if (result.isError) {
    fail(`tool error: ${JSON.stringify(result.content)}`);
  }
  if (result.structuredContent) return result.structuredContent;
  const text = result.content?.find((c) => c.type === "text")?.text;
  if (text === undefined) fail(`tool result without structuredContent or text: ${JSON.stringify(result)}`);
  return JSON.parse(text);
}

async function call(session, name, args = {}) {
  return payload(await session.client.callTool({ name, arguments: args }));
}

// Collects channel notifications for one session; `next()` waits for the next one.
class Inbox {
  constructor(client) {
    this.received = [];
    this.waiters = [];
    client.setNotificationHandler(ChannelNotificationSchema, (notification) => {
      this.received.push(notification);
      const waiter = this.waiters.shift();
      if (waiter) waiter();
    });
  }

  // Resolves with the first notification after index `from`, or null after `ms`.
  async after(from, ms) {
    const deadline = Date.now() + ms;
    while (this.received.length <= from) {
      const left = deadline - Date.now();
      if (left <= 0) return null;
      await new Promise((resolve) => {
        const timer = setTimeout(() => {
          this.waiters = this.waiters.filter((w) => w !== wake);
          resolve();
        }, left);
        const wake = () => {
          clearTimeout(timer);
          resolve();
        };
        this.waiters.push(wake);
      });
    }
    return this.received[from];
  }
}

function checkChannel(notification, { text, source, type, to }) {
  const params = notification.params ?? {};
  if (params.content !== text) {
    fail(`content: expected ${JSON.stringify(text)}, got ${JSON.stringify(params.content)}`);
  }
  const meta = params.meta;
  if (!meta || typeof meta !== "object" || Array.isArray(meta)) {
    fail(`meta missing or not an object: ${JSON.stringify(params)}`);
  }
  for (const [key, value] of Object.entries(meta)) {
    if (typeof value !== "string") {
      fail(`meta.${key} is ${typeof value} (${JSON.stringify(value)}), every value must be a string`);
    }
    if (!META_KEY.test(key)) fail(`meta key ${JSON.stringify(key)} is outside [A-Za-z_][A-Za-z0-9_]*`);
  }
  for (const key of ["id", "ts", "source", "room", "type"]) {
    if (!meta[key]) fail(`meta.${key} missing: ${JSON.stringify(meta)}`);
  }
  if (meta.source !== source) fail(`meta.source: expected ${source}, got ${meta.source}`);
  if (meta.type !== type) fail(`meta.type: expected ${type}, got ${meta.type}`);
  if (!(meta.to ?? "").split(",").includes(to)) {
    fail(`meta.to: expected to contain ${to}, got ${JSON.stringify(meta.to)}`);
  }
  return meta;
}

async function main() {
  const base = process.argv[2];
  if (!base) {
    process.stderr.write("usage: node channel_roundtrip.mjs <base url, e.g. http://127.0.0.1:9315>\n");
    process.exit(64);
  }
  const tag = `${process.pid}-${Date.now()}`;

  step = "connect B (beta)";
  const b = await connect(base, "beta");
  const inbox = new Inbox(b.client);
  step = "connect A (alpha)";
  const a = await connect(base, "alpha");

  step = "tools/list";
  const tools = (await a.client.listTools()).tools.map((t) => t.name);
  if (!tools.includes("send")) fail(`tools/list has no send: ${tools.join(", ")}`);

  step = "salon_status";
  const statusB = await call(b, "salon_status");
  const statusA = await call(a, "salon_status");
  const seatB = statusB?.session?.seat;
  const seatA = statusA?.session?.seat;
  if (!seatB || !seatB.startsWith("beta#")) fail(`B's seat: ${JSON.stringify(statusB?.session)}`);
  if (!seatA || !seatA.startsWith("alpha#")) fail(`A's seat: ${JSON.stringify(statusA?.session)}`);
  const serverCaps = b.client.getServerCapabilities() ?? {};
  if (!serverCaps.experimental?.["claude/channel"]) {
    fail(`server does not declare experimental["claude/channel"]: ${JSON.stringify(serverCaps)}`);
  }

  step = "QUESTION A -> B is pushed";
  const question = `node sdk question ${tag}`;
  const sentAt = Date.now();
  const sent = await call(a, "send", { text: question, type: "QUESTION", to: [seatB] });
  const first = await inbox.after(0, PUSH_TIMEOUT_MS);
  if (!first) fail(`no ${CHANNEL} reached B within ${PUSH_TIMEOUT_MS} ms (send report: ${JSON.stringify(sent)})`);
  const latencyMs = Date.now() - sentAt;
  const meta = checkChannel(first, { text: question, source: seatA, type: "QUESTION", to: seatB });

  step = "broadcast FACT is not pushed";
  const fact = `node sdk fact ${tag}`;
  await call(a, "send", { text: fact, type: "FACT" });
  const leaked = await inbox.after(1, SILENCE_MS);
  if (leaked) fail(`a broadcast FACT was pushed to B: ${JSON.stringify(leaked.params)}`);

  step = "QUESTION after the FACT is pushed (stream still alive)";
  const question2 = `node sdk second question ${tag}`;
  await call(a, "send", { text: question2, type: "QUESTION", to: [seatB] });
  const second = await inbox.after(1, PUSH_TIMEOUT_MS);
  if (!second) fail(`the QUESTION sent after the FACT did not reach B within ${PUSH_TIMEOUT_MS} ms`);
  checkChannel(second, { text: question2, source: seatA, type: "QUESTION", to: seatB });

  step = "quiet B is not pushed";
  await call(b, "quiet", { for: "1h" });
  const question3 = `node sdk quiet question ${tag}`;
  await call(a, "send", { text: question3, type: "QUESTION", to: [seatB] });
  const woken = await inbox.after(2, SILENCE_MS);
  if (woken) fail(`a quiet seat was pushed to: ${JSON.stringify(woken.params)}`);

  step = "quiet B still has the QUESTION in its inbox";
  const unread = await call(b, "inbox", { limit: 100 });
  const unreadText = JSON.stringify(unread);
  if (!unreadText.includes(question3)) fail(`B's inbox lacks the quiet-time QUESTION: ${unreadText}`);

  step = "unlabeled session C cannot send";
  const c = await connect(base, null);
  let refusal = null;
  try {
    const result = await c.client.callTool({ name: "send", arguments: { text: `anon ${tag}` } });
    fail(`an unlabeled send succeeded: ${JSON.stringify(result)}`);
  } catch (err) {
    if (err instanceof Failure) throw err;
    refusal = err;
  }
  if (refusal?.code !== -32602) {
    fail(`unlabeled send: expected JSON-RPC error -32602, got ${refusal?.code}: ${refusal?.message}`);
  }

  step = "no stray push reached B";
  if (inbox.received.length !== 2) {
    fail(`B got ${inbox.received.length} pushes, expected 2: ${JSON.stringify(inbox.received.slice(2))}`);
  }

  step = "done";
  return {
    ok: true,
    protocolVersion: statusB.session.protocolVersion,
    seats: { alpha: seatA, beta: seatB },
    pushed: inbox.received.length,
    latencyMs,
    meta,
    factPushed: false,
    quietPushed: false,
    unlabeledSendError: refusal.code,
    transportErrors: [...errors],
  };
}

main()
  .then(async (summary) => {
    clearTimeout(watchdog);
    await Promise.allSettled(clients.map((c) => c.close()));
    finish(0, summary);
  })
  .catch(async (err) => {
    clearTimeout(watchdog);
    await Promise.allSettled(clients.map((c) => c.close()));
    const message = err instanceof Failure ? err.message : `${err?.name ?? "Error"}: ${err?.message ?? err}`;
    finish(1, { ok: false, step, error: message, errors });
  });
