"""Schedules: claiming due slots and running one fire."""

__all__ = ["firer", "runs"]  # its modules
