"""MCP tool servers in the worker: the sessions, the calls, the tools they become."""
