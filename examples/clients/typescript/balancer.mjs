// balancer.mjs drives replicas of an example server behind a load balancer
// with the official MCP TypeScript SDK (@modelcontextprotocol/sdk, pinned
// in package.json). It is run by ../balancer_test.go:
//
//	MCP_BEARER_TOKEN=TOKEN node balancer.mjs http://127.0.0.1:PORT/mcp
//
// It connects one Client over Streamable HTTP, lists the tools (the SDK
// checks every schema), then reads commands from stdin, one JSON object a
// line, and answers each on stdout with one JSON line carrying the same
// "id". The test decides what to do and when; this script only speaks MCP:
//
//	{"id":1,"op":"call","tool":T,"args":{...}}
//	    client.callTool: the SDK checks structuredContent against the
//	    tool's outputSchema.
//	{"id":2,"op":"approve","tool":T,"args":{...},"accept":true}
//	    a tool that asks the user (apply_change, undo_change, undo_run with
//	    dry_run=false): the first call returns the question, the second
//	    carries the user's answer and the sealed requestState back.
//
// Every answer names, for each HTTP request the command made, the replica
// that served it: the balancer adds an X-Replica response header, read
// through the transport's fetch option.
//
// User approval over stateless HTTP, and what this script does about it.
// A stateless server cannot send the client a request (elicitation/create)
// in the middle of a tool call: there is no session to send it on. Only
// protocol 2026-07-28 (multi round-trip requests) lets the server ask: the
// tool result carries resultType "input_required", inputRequests (here one
// form, "approve") and an opaque requestState; the client asks the user and
// calls the tool again with inputResponses and the same requestState. The
// server's approval state lives only in that sealed requestState, so the
// retry may reach any replica that holds the same key (the changeset
// Guard keeps one in the ledger).
//
// SDK 1.32.2 does not speak 2026-07-28: its newest protocol is 2025-11-25
// (LATEST_PROTOCOL_VERSION in its types.js), it connects with initialize,
// and it knows nothing of inputRequests or requestState. Called the usual
// way (client.callTool on a 2025-11-25 session), such a tool can only
// fail: go-sdk, for clients before 2026-07-28, tries to send
// elicitation/create itself, which a stateless server cannot. So for the
// approval calls this script does by hand what a 2026-07-28 client does,
// through the SDK's public low-level API:
//
//   - go-sdk (v1.8.0, streamable.go and shared.go) treats a request as
//     protocol 2026-07-28 when its Mcp-Protocol-Version header says so and
//     its params._meta carries the same
//     "io.modelcontextprotocol/protocolVersion" with the client's
//     "io.modelcontextprotocol/clientCapabilities" (and optionally
//     "io.modelcontextprotocol/clientInfo"): capabilities travel with each
//     request instead of an initialize. A header and _meta that disagree
//     are refused (400).
//   - The header: StreamableHTTPClientTransport.setProtocolVersion, the
//     method the Client itself calls after initialize, switches it to
//     2026-07-28 for the approval calls and back to the negotiated
//     version afterwards. Commands run one at a time, so no other request
//     is in flight meanwhile. 2026-07-28 also requires the standard
//     headers Mcp-Method and, for tools/call, Mcp-Name (go-sdk refuses a
//     request without them, -32020): the transport's fetch option, a
//     wrapper around fetch, adds them from the request body.
//   - The call: client.request({method: 'tools/call', params: {name,
//     arguments, _meta, inputResponses?, requestState?}}, ResultSchema).
//     ResultSchema keeps unknown keys, so resultType, inputRequests and
//     requestState reach this script; callTool's CallToolResultSchema
//     would not promise that.
//
// The user here is the test: "accept" answers the form with approve=true
// (action accept), otherwise with decline.
//
// It exits 0 when stdin closes, 1 when connecting or listing failed (the
// answer line then has "error"), 2 on bad usage.
import readline from 'node:readline';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ResultSchema } from '@modelcontextprotocol/sdk/types.js';

const MRTR_PROTOCOL = '2026-07-28';
const META = 'io.modelcontextprotocol/';
const clientInfo = { name: 'changeset-go-balancer-test', version: '1.0.0' };
// A single request must never hang the test: a replica killed mid-call
// surfaces as an error within this time at the latest.
const TIMEOUT_MS = 15000;

const url = process.argv[2];
if (!url) {
  process.stderr.write('usage: MCP_BEARER_TOKEN=TOKEN node balancer.mjs URL\n');
  process.exit(2);
}

let replicas = []; // the X-Replica of every response of the current command

// fetchNamingReplica is the transport's fetch: it records X-Replica, and on
// a request sent as 2026-07-28 adds the standard headers that protocol
// requires of every request (Mcp-Method, and Mcp-Name for tools/call),
// which SDK 1.32.2 does not know to send.
async function fetchNamingReplica(input, init = {}) {
  const h = new Headers(init.headers);
  if (h.get('mcp-protocol-version') === MRTR_PROTOCOL && typeof init.body === 'string') {
    const msg = JSON.parse(init.body);
    if (msg.method) h.set('Mcp-Method', msg.method);
    if (msg.method === 'tools/call') h.set('Mcp-Name', msg.params.name);
    init = { ...init, headers: h };
  }
  const res = await fetch(input, init);
  replicas.push(res.headers.get('x-replica'));
  return res;
}

const headers = {};
if (process.env.MCP_BEARER_TOKEN) headers.Authorization = `Bearer ${process.env.MCP_BEARER_TOKEN}`;
const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers }, fetch: fetchNamingReplica });
const client = new Client(clientInfo, { capabilities: { elicitation: { form: {} } } });

function say(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

function textOf(res) {
  return (res.content ?? [])
    .filter((c) => c.type === 'text')
    .map((c) => c.text)
    .join('\n');
}

// outcome is what the test reads of one tool result.
function outcome(res, replica) {
  return {
    replica,
    isError: Boolean(res.isError),
    error: res.isError ? textOf(res) : undefined,
    structuredContent: res.structuredContent ?? null,
  };
}

// mrtrCall sends one tools/call as protocol 2026-07-28 (see the header).
async function mrtrCall(name, args, answer) {
  const params = {
    name,
    arguments: args,
    _meta: {
      [META + 'protocolVersion']: MRTR_PROTOCOL,
      [META + 'clientInfo']: clientInfo,
      [META + 'clientCapabilities']: { elicitation: { form: {} } },
    },
    ...answer,
  };
  const negotiated = transport.protocolVersion;
  transport.setProtocolVersion(MRTR_PROTOCOL);
  replicas = [];
  try {
    const res = await client.request({ method: 'tools/call', params }, ResultSchema, { timeout: TIMEOUT_MS });
    return { res, replica: replicas[0] ?? null };
  } finally {
    transport.setProtocolVersion(negotiated);
  }
}

const ops = {
  async call({ tool, args = {} }) {
    replicas = [];
    const res = await client.callTool({ name: tool, arguments: args }, undefined, { timeout: TIMEOUT_MS });
    return outcome(res, replicas[0] ?? null);
  },

  async approve({ tool, args = {}, accept = true }) {
    const first = await mrtrCall(tool, args);
    const q = first.res;
    if (q.resultType !== 'input_required') {
      // Refused before asking (or a server that did not ask): no question.
      return { ask: null, result: outcome(q, first.replica) };
    }
    // Each input request is {method, params}: here elicitation/create
    // with a form; the answer is the bare ElicitResult.
    const req = q.inputRequests?.approve;
    const form = req?.params;
    if (req?.method !== 'elicitation/create' || form?.mode !== 'form' || typeof q.requestState !== 'string' || q.requestState === '') {
      throw new Error(`${tool}: input_required without an "approve" form and a requestState: ${JSON.stringify(q.inputRequests)}`);
    }
    const ask = { replica: first.replica, message: form.message };
    const answer = accept ? { action: 'accept', content: { approve: true } } : { action: 'decline' };
    try {
      const second = await mrtrCall(tool, args, { inputResponses: { approve: answer }, requestState: q.requestState });
      if (second.res.resultType === 'input_required') {
        throw new Error(`${tool}: asked again after the answer`);
      }
      return { ask, result: outcome(second.res, second.replica) };
    } catch (err) {
      // The answer's request failed (a replica killed mid-apply): the
      // question was still asked, and the test needs to know by whom.
      return { ask, result: { replica: replicas[0] ?? null, thrown: String(err?.message ?? err) } };
    }
  },
};

try {
  await client.connect(transport, { timeout: TIMEOUT_MS });
  const { tools } = await client.listTools();
  say({
    id: 0,
    server: client.getServerVersion()?.name ?? null,
    protocolVersion: transport.protocolVersion ?? null,
    tools: tools.map((t) => t.name),
  });
} catch (err) {
  say({ id: 0, error: String(err?.stack ?? err) });
  process.exit(1);
}

const lines = readline.createInterface({ input: process.stdin });
for await (const line of lines) {
  if (!line.trim()) continue;
  let cmd;
  try {
    cmd = JSON.parse(line);
    const op = ops[cmd.op];
    if (!op) throw new Error(`unknown op ${cmd.op}`);
    say({ id: cmd.id, ...(await op(cmd)) });
  } catch (err) {
    say({ id: cmd?.id ?? null, thrown: String(err?.message ?? err), replicas });
  }
}
await client.close().catch(() => {});
