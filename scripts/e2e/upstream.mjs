#!/usr/bin/env node
// A small upstream MCP server for code mode's end-to-end test (codemode.mjs), on the
// TypeScript SDK's low-level Server over stdio: mcp-exec runs it as a child (its
// --upstreams file names `node upstream.mjs`) and programs in the sandbox call its
// tools through mcptools. Tools:
//
//   lookup {id}   a record as structured content: {id, name, score}
//   echo {text}   the text back
//   secret {}     never allowed by the test's allowlist; the test checks it is denied
//
// It writes nothing on stdout but MCP messages.

import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const tools = [
  {
    name: 'lookup',
    description: 'Look up record id: its name and score.',
    inputSchema: { type: 'object', properties: { id: { type: 'integer', description: 'the record' } }, required: ['id'] },
  },
  {
    name: 'echo',
    description: 'Echo the text back.',
    inputSchema: { type: 'object', properties: { text: { type: 'string', description: 'the text' } }, required: ['text'] },
  },
  {
    name: 'secret',
    description: 'Not on the allowlist.',
    inputSchema: { type: 'object', properties: {} },
  },
];

const server = new Server({ name: 'e2e-upstream', version: '0.0.0' }, { capabilities: { tools: {} } });
server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools }));
server.setRequestHandler(CallToolRequestSchema, async (req) => {
  const args = req.params.arguments ?? {};
  switch (req.params.name) {
    case 'lookup': {
      const rec = { id: args.id, name: `record-${args.id}`, score: (args.id * 7) % 10 };
      return { content: [{ type: 'text', text: JSON.stringify(rec) }], structuredContent: rec };
    }
    case 'echo':
      return { content: [{ type: 'text', text: String(args.text) }] };
    case 'secret':
      return { content: [{ type: 'text', text: 'must not be reached' }] };
    default:
      return { isError: true, content: [{ type: 'text', text: `unknown tool ${req.params.name}` }] };
  }
});
await server.connect(new StdioServerTransport());
