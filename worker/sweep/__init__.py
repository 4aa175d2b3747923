"""The scheduler's sweep: expiry, orphaned legs and the indexes' reconciliation."""

__all__ = ["reconcile", "sweeper"]  # its modules
