"""Webhooks in and out: Standard Webhooks signatures, outbound events and their delivery,
and the prompt templates of inbound triggers (see docs/architecture.md, "Webhooks")."""
