"""MCP tool servers: what both the web and the workers need (the listing's rules, the store)."""
