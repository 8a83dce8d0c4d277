// Drives `skillsearch mcp` with the official TypeScript SDK (@modelcontextprotocol/sdk 1.32.2)
// and prints one JSON object. usage: node client.mjs BIN HOME SKILLS MODE QUERY
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [bin, home, skills, mode, query] = process.argv.slice(2);
const client = new Client({ name: "skillsearch-test", version: "1.0.0" });
await client.connect(new StdioClientTransport({ command: bin, args: ["--home", home, "mcp", "--skills", skills, "--mode", mode] }));
const out = { server: client.getServerVersion() };
const tools = await client.listTools();
out.tools = tools.tools.map((t) => t.name);
if (out.tools.includes("skill_search")) {
  const r = await client.callTool({ name: "skill_search", arguments: { query } });
  out.search = r.content[0].text;
  try {
    await client.callTool({ name: "no_such_tool", arguments: {} });
    out.unknown = "accepted";
  } catch (e) {
    out.unknown = `refused: ${e.code}`;
  }
}
await client.close();
console.log(JSON.stringify(out));
