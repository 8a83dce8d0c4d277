"""Drives `skillsearch mcp` with the official Python MCP SDK (mcp 2.3.0) and prints one JSON
object: negotiated version, server info, tools, a search reply, a read reply and call latency.

usage: client.py BIN HOME SKILLS MODE(on_demand|auto) CLIENT_MODE(auto|legacy) QUERY [CALLS]
"""
import asyncio
import json
import sys
import time

from mcp import Client, StdioServerParameters


async def main() -> None:
    binary, home, skills, mode, client_mode, query = sys.argv[1:7]
    calls = int(sys.argv[7]) if len(sys.argv) > 7 else 0
    params = StdioServerParameters(command=binary, args=["--home", home, "mcp", "--skills", skills, "--mode", mode])
    out = {}
    async with Client(params, mode=client_mode, read_timeout_seconds=30) as c:
        out["protocol_version"] = str(c.protocol_version)
        out["server_name"] = c.server_info.name if c.server_info else None
        out["server_version"] = c.server_info.version if c.server_info else None
        tools = await c.list_tools()
        out["tools"] = [t.name for t in tools.tools]
        out["schemas"] = {t.name: t.input_schema for t in tools.tools}
        if "skill_search" in out["tools"]:
            r = await c.call_tool("skill_search", {"query": query})
            out["search"] = r.content[0].text
            out["search_is_error"] = bool(r.is_error)
            r = await c.call_tool("skill_search", {"query": ""})
            out["empty"] = r.content[0].text
            r = await c.call_tool("skill_read", {"id": "local/pdf-tables", "path": "references/notes.md"})
            out["read"] = r.content[0].text
            lat = []
            for i in range(calls):
                t = time.perf_counter()
                await c.call_tool("skill_search", {"query": f"{query} {i % 7}"})
                lat.append((time.perf_counter() - t) * 1000)
            if lat:
                lat.sort()
                out["p50_ms"] = lat[len(lat) // 2]
                out["p95_ms"] = lat[max(0, int(len(lat) * 0.95) - 1)]
        else:
            try:
                await c.call_tool("skill_search", {"query": query})
                out["auto_call"] = "accepted"
            except Exception as e:  # the server refuses tools in auto mode
                out["auto_call"] = f"refused: {e}"
    print(json.dumps(out))


asyncio.run(main())
