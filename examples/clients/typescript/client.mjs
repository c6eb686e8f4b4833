// client.mjs drives one example server with the official MCP TypeScript SDK
// (@modelcontextprotocol/sdk, pinned in package.json), the client most MCP
// hosts are built on. It is run by ../typescript_test.go:
//
//	node client.mjs BINARY [ARGS...]
//	MCP_BEARER_TOKEN=TOKEN node client.mjs --url http://127.0.0.1:8080/mcp
//
// It starts BINARY with ARGS over stdio (with this process's environment),
// or connects to a server already serving Streamable HTTP at the URL,
// presenting $MCP_BEARER_TOKEN (kept out of the command line, which other
// users can read) as its bearer token. It lists the tools and runs the flow for the server it finds (settings, notes
// or tickets, by the server's name). listTools() is where the SDK checks
// every tool's inputSchema and outputSchema; callTool() then checks each
// result's structuredContent against the tool's outputSchema. A schema the
// SDK rejects therefore fails this script: it is a bug in the server, never
// something to work around here.
//
// It prints one JSON document to stdout: the server, its tools, and every
// step with its structuredContent (or the tool error's text). It exits 1
// when anything threw (the document then holds the error) and 2 on bad
// usage.
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ResultSchema } from '@modelcontextprotocol/sdk/types.js';

const argv = process.argv.slice(2);
const url = argv[0] === '--url' ? argv[1] : null;
const [binary, ...args] = url ? [] : argv;
if (!binary && !url) {
  process.stderr.write('usage: node client.mjs BINARY [ARGS...] | node client.mjs --url URL\n');
  process.exit(2);
}

const doc = { server: null, tools: [], steps: [], uncalled: [], error: null };
const tools = new Map(); // name -> Tool, from listTools
const called = new Set(); // tools that returned a result without isError

const client = new Client({ name: 'changeset-go-typescript-test', version: '1.0.0' });

// call calls a tool and records the step under label. A tool error
// (isError) throws unless expectError is set; a result the SDK finds
// invalid throws from callTool itself.
async function call(label, name, args = {}, { expectError = false } = {}) {
  const step = { label, tool: name, arguments: args };
  doc.steps.push(step);
  const res = await client.callTool({ name, arguments: args });
  const text = (res.content ?? [])
    .filter((c) => c.type === 'text')
    .map((c) => c.text)
    .join('\n');
  if (res.isError) {
    step.isError = true;
    step.error = text;
    if (!expectError) throw new Error(`${label}: ${name} returned a tool error: ${text}`);
    return null;
  }
  if (expectError) throw new Error(`${label}: ${name} succeeded, a tool error was expected`);
  step.structuredContent = res.structuredContent ?? null;
  // Validated by callTool: it compiled the tool's outputSchema in listTools.
  step.validated = Boolean(tools.get(name)?.outputSchema && res.structuredContent);
  called.add(name);
  return res.structuredContent ?? {};
}

const flows = {
  async settings() {
    await call('settings_before', 'get_settings');
    const p = await call('preview', 'preview_set_setting', { key: 'theme', value: 'dark' });
    const a = await call('apply', 'apply_change', { change_id: p.change_id, confirmation_token: p.confirmation_token });
    await call('settings_applied', 'get_settings');
    await call('replay', 'apply_change', { change_id: p.change_id, confirmation_token: p.confirmation_token }, { expectError: true });
    await call('status_applied', 'get_change_status', { change_id: p.change_id });
    await call('undo', 'undo_change', { change_id: a.change_id, undo_token: a.undo_token });
    await call('status_undone', 'get_change_status', { change_id: p.change_id });

    const run = await call('start_run', 'start_run', { label: 'TypeScript client test' });
    const rp = await call('run_preview', 'preview_set_setting', { key: 'language', value: 'fr', run_id: run.run_id });
    await call('run_apply', 'apply_change', { change_id: rp.change_id, confirmation_token: rp.confirmation_token });
    await call('settings_run_applied', 'get_settings');
    const dry = await call('undo_run_dry', 'undo_run', { run_id: run.run_id });
    await call('undo_run', 'undo_run', { run_id: run.run_id, dry_run: false, confirmation_token: dry.confirmation_token });
    await call('get_run', 'get_run', { run_id: run.run_id });
    await call('list_runs', 'list_runs', {});
    await call('settings_after', 'get_settings');
  },

  async notes() {
    await call('list_before', 'list_notes');
    const p = await call('preview', 'preview_write_note', { name: 'todo.txt', content: 'milk\n' });
    const a = await call('apply', 'apply_change', { change_id: p.change_id, confirmation_token: p.confirmation_token });
    await call('read', 'read_note', { name: 'todo.txt' });
    await call('preview_delete', 'preview_delete_note', { name: 'todo.txt' });
    await call('undo', 'undo_change', { change_id: a.change_id, undo_token: a.undo_token });
    await call('status_undone', 'get_change_status', { change_id: p.change_id });
    await call('list_after', 'list_notes');
  },

  async tickets() {
    const p = await call('preview', 'preview_create_ticket', { title: 'from TypeScript' });
    const a = await call('apply', 'apply_change', { change_id: p.change_id, confirmation_token: p.confirmation_token });
    await call('list', 'list_tickets');
    const id = a.result?.id;
    await call('preview_update', 'preview_update_ticket', { id, title: 'from TypeScript', status: 'closed' });
    await call('preview_delete', 'preview_delete_ticket', { id });
    await call('status_applied', 'get_change_status', { change_id: p.change_id });
  },
};

let failed = false;
try {
  let transport;
  if (url) {
    const headers = {};
    if (process.env.MCP_BEARER_TOKEN) headers.Authorization = `Bearer ${process.env.MCP_BEARER_TOKEN}`;
    transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
  } else {
    transport = new StdioClientTransport({
      command: binary,
      args,
      // The SDK passes only a few variables (HOME, PATH, ...) unless told:
      // the server needs MCP_CHANGESET_WRITE_MODE and whatever the test sets.
      env: Object.fromEntries(Object.entries(process.env).filter(([, v]) => typeof v === 'string')),
      stderr: 'inherit',
    });
  }
  await client.connect(transport);
  doc.server = client.getServerVersion() ?? null;

  let listed;
  try {
    listed = await client.listTools();
  } catch (err) {
    // The SDK's error names tools by index (path ["tools", 3, ...]): ask
    // again without its checks, only to name them in the report.
    doc.listToolsError = err instanceof Error ? err.message : String(err);
    const raw = await client.request({ method: 'tools/list', params: {} }, ResultSchema).catch(() => null);
    doc.rawTools = (raw?.tools ?? []).map((t, i) => `tools[${i}] = ${t?.name}`);
    throw err;
  }
  for (const t of listed.tools) {
    tools.set(t.name, t);
    doc.tools.push({ name: t.name, hasOutputSchema: Boolean(t.outputSchema), annotations: t.annotations ?? null });
  }

  const name = doc.server?.name ?? (binary ? path.basename(binary) : '');
  const flow = flows[name];
  if (!flow) throw new Error(`no flow for server ${JSON.stringify(name)}`);
  await flow();
} catch (err) {
  failed = true;
  doc.error = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
  const last = doc.steps[doc.steps.length - 1];
  if (last && !('structuredContent' in last) && !last.isError) last.thrown = doc.error;
} finally {
  doc.uncalled = [...tools.keys()].filter((t) => !called.has(t)).sort();
  await client.close().catch(() => {});
}

process.stdout.write(JSON.stringify(doc, null, 2) + '\n');
process.exitCode = failed ? 1 : 0;
