"""Webhook delivery: the outbox's dispatcher, one signed attempt and its backoff, and their task."""

__all__ = ["delivery", "dispatch", "tasks"]  # its modules
