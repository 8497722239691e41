// The tools of the MCP servers this sandbox's server is configured with, as JavaScript.
//
//     import { echo_server } from "mcptools";
//     const r = await echo_server.echo({ text: "hi" });
//
// One object per server, one async function per allowed tool taking one arguments
// object. A result is decoded as Python's mcptools does it: the tool's structured
// content when it has one, else its text (parsed as JSON when it is JSON), else an
// array of its items. A tool that fails rejects with ToolError carrying the tool's own
// text; a call the server refuses with a subclass: ToolDenied, ToolBudgetExceeded,
// ToolTimeout, ToolUnavailable. search(text) and describe("server.tool") read the
// catalog here, with no call. Several calls may be in flight at once (Promise.all).
//
// require("mcptools") (Node 20's require of an ES module) gets the default export,
// which refuses a name it does not have as the import does (SyntaxError).
//
// The wire is Python's (launcher/mcptools.py): a call is u32 length, u32 id, JSON on
// _callFd, which the bootstrap relays as C frames; replies are Y frames (u32 id, JSON)
// on _replyFd. The bootstrap puts _callFd, _replyFd and _catalog before this text; the
// launcher appends the named exports of the servers. A session's node loads the module
// once and rebinds it to each call's descriptors and catalog (_rebind).
import { read, writeSync } from "node:fs";

let callFd = _callFd, replyFd = _replyFd;

export class ToolError extends Error {
  constructor(message, server = "", tool = "", kind = "tool") {
    super(message);
    this.name = new.target.name;
    this.server = server;
    this.tool = tool;
    this.kind = kind;
  }
}
export class ToolDenied extends ToolError {}
export class ToolBudgetExceeded extends ToolError {}
export class ToolTimeout extends ToolError {}
export class ToolUnavailable extends ToolError {}

const KINDS = { denied: ToolDenied, budget: ToolBudgetExceeded, too_large: ToolBudgetExceeded, timeout: ToolTimeout, unavailable: ToolUnavailable };

export class Image {
  constructor(data, mimeType) { this.data = data; this.mimeType = mimeType; }
}
export class Resource {
  constructor(uri, mimeType, text = null, data = null) { this.uri = uri; this.mimeType = mimeType; this.text = text; this.data = data; }
}

const pending = new Map(); // call id: its settle function, given the reply's bytes or null
let nextId = 1, closed = null, reading = false, buf = Buffer.alloc(0), bound = 0; // bound: which binding (_rebind)

// pump reads replies only while calls wait for them: an idle read would keep the
// program's event loop, and so the program, alive after its end.
function pump() {
  if (reading || closed !== null || pending.size === 0) return;
  reading = true;
  const chunk = Buffer.allocUnsafe(1 << 16), mine = bound;
  read(replyFd, chunk, 0, chunk.length, null, (err, n) => {
    if (mine !== bound) return; // a read of an earlier call's FIFO
    reading = false;
    if (err || n === 0) return fail(err ? `the bridge to the server broke: ${err.message}` : "the bridge to the server closed");
    buf = Buffer.concat([buf, chunk.subarray(0, n)]);
    while (buf.length >= 5) {
      // A frame that is not a reply leaves no way to find the next one.
      const len = buf.readUInt32BE(1);
      if (buf[0] !== 0x59 || len < 4) return fail(`the bridge to the server broke: a malformed reply frame (kind ${buf[0]}, length ${len})`);
      if (buf.length < 5 + len) break;
      const id = buf.readUInt32BE(5), body = buf.subarray(9, 5 + len);
      buf = buf.subarray(5 + len);
      const settle = pending.get(id);
      if (settle) {
        pending.delete(id);
        settle(body);
      }
    }
    pump();
  });
}

function fail(why) {
  closed = why;
  for (const settle of pending.values()) settle(null);
  pending.clear();
}

function call(server, tool, args) {
  return new Promise((resolve, reject) => {
    if (args === undefined || args === null) args = {};
    if (typeof args !== "object" || Array.isArray(args)) {
      return reject(new TypeError(`${server}.${tool} takes one object of arguments, not ${Array.isArray(args) ? "an array" : typeof args}`));
    }
    if (closed !== null) return reject(new ToolUnavailable(closed, server, tool, "unavailable"));
    const body = Buffer.from(JSON.stringify({ server, tool, arguments: args }));
    const id = nextId++;
    const msg = Buffer.alloc(8 + body.length);
    msg.writeUInt32BE(body.length, 0);
    msg.writeUInt32BE(id, 4);
    body.copy(msg, 8);
    try {
      for (let off = 0; off < msg.length;) off += writeSync(callFd, msg, off);
    } catch (e) {
      closed = `the bridge to the server closed (${e.code || e.message})`;
      return reject(new ToolUnavailable(closed, server, tool, "unavailable"));
    }
    pending.set(id, (reply) => {
      if (reply === null) return reject(new ToolUnavailable(closed || "no reply", server, tool, "unavailable"));
      try {
        const r = JSON.parse(reply.toString());
        if (r === null || typeof r !== "object" || Array.isArray(r)) throw new Error("not a JSON object");
        resolve(decode(server, tool, r));
      } catch (e) {
        reject(e instanceof ToolError ? e : new ToolUnavailable(`a malformed reply from the server (${e.name}: ${e.message})`, server, tool, "unavailable"));
      }
    });
    pump();
  });
}

function decode(server, tool, reply) {
  const err = reply.error;
  if (err !== undefined && err !== null) {
    const kind = err.kind || "tool";
    throw new (KINDS[kind] || ToolError)(err.message || "", server, tool, kind);
  }
  const res = reply.result || {};
  const items = (res.content || []).map(item);
  if (res.isError) {
    throw new ToolError(items.filter((i) => typeof i === "string").join("\n") || "the tool reported an error", server, tool, "tool");
  }
  if (res.structuredContent !== undefined && res.structuredContent !== null) return res.structuredContent;
  if (items.length === 1) {
    if (typeof items[0] !== "string") return items[0];
    try {
      return JSON.parse(items[0]);
    } catch {
      return items[0];
    }
  }
  return items;
}

function item(c) {
  switch (c.type) {
    case "text": return c.text ?? "";
    case "image": case "audio": return new Image(Buffer.from(c.data || "", "base64"), c.mimeType || "");
    case "resource": {
      const r = c.resource || {};
      return new Resource(r.uri || "", r.mimeType || "", r.text ?? null, "blob" in r ? Buffer.from(r.blob, "base64") : null);
    }
    case "resource_link": return new Resource(c.uri || "", c.mimeType || "");
    default: return c;
  }
}

const servers = {}; // module name: its object, refilled in place by each build
const docs = new Map();
const summaries = [];
const all = {}; // the default export

function build(catalog) {
  docs.clear();
  summaries.length = 0;
  for (const k of Object.keys(all)) delete all[k];
  for (const obj of Object.values(servers)) for (const k of Object.keys(obj)) delete obj[k];
  for (const srv of catalog.servers || []) {
    const obj = (servers[srv.module] ??= {});
    for (const t of srv.tools || []) {
      const schema = t.inputSchema || {};
      const props = schema.properties || {}, required = new Set(schema.required || []);
      const names = Object.keys(props).sort((a, b) => required.has(b) - required.has(a));
      const sig = `${srv.module}.${t.function}({${names.map((n) => (required.has(n) ? n : n + "?")).join(", ")}})`;
      const lines = [t.description || "(no description)", "", "Arguments:"];
      for (const [n, p] of Object.entries(props)) {
        lines.push(`  ${n} (${(p && p.type) || "any"}${required.has(n) ? ", required" : ""}): ${((p && p.description) || "").trim()}`);
      }
      if (names.length === 0) lines.push("  (none)");
      const doc = `${sig}\n\n${lines.join("\n")}`;
      obj[t.function] = { [t.function]: async (args) => call(srv.name, t.name, args) }[t.function];
      docs.set(`${srv.module}.${t.function}`, doc);
      if (!docs.has(`${srv.name}.${t.name}`)) docs.set(`${srv.name}.${t.name}`, doc);
      const hay = `${srv.name} ${t.name} ${t.description || ""}`.toLowerCase();
      summaries.push([hay, `${sig}  // ${(t.description || "").trim().split("\n")[0]}`]);
    }
    all[srv.module] = obj;
  }
  Object.assign(all, { search, describe, ToolError, ToolDenied, ToolBudgetExceeded, ToolTimeout, ToolUnavailable, Image, Resource });
}
build(_catalog);

// search lists the tools whose name or description contains text (any case): their
// signatures with the first line of their description.
export function search(text) {
  const q = String(text).toLowerCase();
  return summaries.filter(([hay]) => hay.includes(q)).map(([, line]) => line);
}

// describe gives one tool's signature and description, named "server.tool" or
// "module.function".
export function describe(name) {
  const d = docs.get(name);
  if (d === undefined) throw new Error(`no tool ${JSON.stringify(name)}: see search()`);
  return d;
}

// _rebind binds the module to a session's call: its descriptors and catalog (JSON);
// null, at the call's end, leaves it unbound until the next. Objects and functions a
// program kept from an earlier call go on working, through the call's descriptors.
export function _rebind(catalog, call, reply) {
  fail(catalog === null ? "the call that bound mcptools has ended" : "rebound to another call");
  callFd = call;
  replyFd = reply;
  bound++;
  buf = Buffer.alloc(0);
  reading = false;
  if (catalog !== null) {
    closed = null;
    build(JSON.parse(catalog));
  }
}

// What require("mcptools") returns: the default export, but a name it does not have
// (a server the allowlist does not name) is an error, as an import of it is, rather
// than undefined. The probes of await, JSON.stringify and CommonJS interop pass.
const strict = new Proxy(all, {
  get(target, key, receiver) {
    if (typeof key === "string" && !(key in target) && key !== "then" && key !== "toJSON" && key !== "__esModule") {
      throw new SyntaxError(`The requested module 'mcptools' does not provide an export named '${key}'`);
    }
    return Reflect.get(target, key, receiver);
  },
});

export { all as default, strict as "module.exports" };
