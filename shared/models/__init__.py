"""What travels through Redis and the API: prompts, steps, chunks, events, notifications, options.

Pure pydantic models and their rules; no I/O.
"""
