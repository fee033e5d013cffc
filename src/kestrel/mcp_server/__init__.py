"""`kestrel mcp serve`: Kestrel's own engines offered to other agents over MCP on stdio.

Four tools: `search` and `map` (the context engine), `apply_edit` (the edit engine) and
`run_task` (a whole headless Kestrel session). The command line starts it; the protocol and the
tools live here, above the service layer and beside the hosted server, which it never imports.
"""
