"""A stateful upstream MCP server for integration/service.sh: `remember`
keeps a note in this process (one instance per client session, so a session
sees only its own notes), `recall` returns them. The description of
`remember` is read from the file named by argv[1] at start, so the test can
change the definition the gateway pins."""

import sys

try:  # mcp 2.x renamed FastMCP to MCPServer
    from mcp.server.mcpserver import MCPServer as FastMCP
except ImportError:
    from mcp.server.fastmcp import FastMCP

notes = []
server = FastMCP("notes")


def remember(text: str) -> str:
    notes.append(text)
    return f"kept {len(notes)}"


def recall() -> str:
    return "notes=" + "|".join(notes)


with open(sys.argv[1], encoding="utf-8") as f:
    description = f.read().strip()
server.add_tool(remember, name="remember", description=description)
server.add_tool(recall, name="recall", description="The notes this session kept")
server.run()
