"""Model providers: a request in, a stream of thinking, text, tool calls and usage out."""
