"""`reviewer mcp-gate`: a stdio MCP server in front of an unmodified upstream MCP server."""
