// Drives `inbox mcp` over stdio with the official TypeScript SDK client:
// tools/list (output schemas and hints; the client then validates every
// result against its tool's output schema), a worker's whole loop with a
// chunked wait (the first chunk times out with progress, the second is
// woken), and an error.
//
//   node client.mjs INBOX_BINARY STORE
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [bin, db] = process.argv.slice(2);
const fail = (msg) => {
  console.error("FAIL: " + msg);
  process.exit(1);
};

const transport = new StdioClientTransport({
  command: bin,
  args: ["mcp", "--agent", "worker", "--db", db],
  stderr: "inherit",
});
const client = new Client({ name: "inbox-ts-test", version: "1.0.0" });
await client.connect(transport);

const call = (name, args = {}, opts = {}) =>
  client.callTool({ name, arguments: args }, undefined, { timeout: 120000, ...opts });
const ok = async (name, args, opts) => {
  const r = await call(name, args, opts);
  if (r.isError || !r.structuredContent || r.structuredContent.ok !== true) {
    fail(`${name}: ${JSON.stringify(r)}`);
  }
  const text = JSON.parse(r.content[0].text);
  if (JSON.stringify(text) !== JSON.stringify(r.structuredContent)) {
    fail(`${name}: the text content is not the structured result`);
  }
  return r.structuredContent;
};

const { tools } = await client.listTools();
const names = tools.map((t) => t.name);
for (const want of ["fetch", "claim", "update", "wait_reply", "done", "send", "receive", "push", "run", "team_create", "ack"]) {
  if (!names.includes(want)) fail(`tools/list has no ${want}: ${names}`);
}
// Every tool says what it returns (the client validates each result
// against it) and what it does: show from cancel, nothing beyond the store.
const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
for (const t of tools) {
  const out = t.outputSchema;
  if (out?.type !== "object" || !out.properties?.ok || !out.required?.includes("command")) {
    fail(`${t.name}: output schema ${JSON.stringify(out)}`);
  }
  if (t.annotations?.openWorldHint !== false) fail(`${t.name}: annotations ${JSON.stringify(t.annotations)}`);
}
if (byName.fetch.annotations.readOnlyHint !== true || byName.cancel.annotations.readOnlyHint !== false ||
    byName.cancel.annotations.destructiveHint !== true || byName.done.annotations.destructiveHint !== false) {
  fail(`hints: fetch ${JSON.stringify(byName.fetch.annotations)}, cancel ${JSON.stringify(byName.cancel.annotations)}`);
}
if (byName.wait_reply.outputSchema.properties.next_event_id?.type !== "integer") {
  fail(`wait_reply's output schema: ${JSON.stringify(byName.wait_reply.outputSchema.properties)}`);
}

const sent = await ok("send", { from: "leader", to: "worker", subject: "Add post CRUD routes", body: "under /posts" });
const tid = sent.thread.thread_id;
const fetched = await ok("fetch");
if (fetched.threads.length !== 1 || fetched.threads[0].thread_id !== tid) fail(`fetch: ${JSON.stringify(fetched)}`);
const claimed = await ok("claim", { thread: tid });
if (claimed.lease.agent_id !== "worker") fail(`claim: ${JSON.stringify(claimed)}`);
const asked = await ok("update", { thread: tid, status: "blocked", summary: "Email/password or OAuth?" });

// A chunked wait: the first chunk times out, with progress on the way.
const progress = [];
const first = await ok("wait_reply", { thread: tid, after_event: asked.message.event_id, max_wait_seconds: 6 }, {
  onprogress: (p) => progress.push(p),
});
if (first.woke !== false || typeof first.next_event_id !== "number") fail(`first chunk: ${JSON.stringify(first)}`);
if (progress.length < 1) fail("no progress notification during a 6 s wait");

await ok("reply", { from: "leader", thread: tid, kind: "answer", summary: "Email/password for the MVP" });
const second = await ok("wait_reply", { thread: tid, after_event: first.next_event_id });
if (second.woke !== true || second.message.summary !== "Email/password for the MVP") fail(`second chunk: ${JSON.stringify(second)}`);
const done = await ok("done", { thread: tid, summary: "Routes added", lease_token: claimed.lease.lease_token });
if (done.thread.status !== "done") fail(`done: ${JSON.stringify(done)}`);

const bad = await call("claim", { thread: "thr_nope" });
if (!bad.isError || bad.structuredContent.ok !== false || bad.structuredContent.error.code !== "not_found") {
  fail(`an unknown thread: ${JSON.stringify(bad)}`);
}

console.log(JSON.stringify({ ok: true, tools: names.length, thread: tid, progress: progress.length }));
await client.close();
