"""Tool policy in the web: what a caller below the operator may not ask for; the overview."""

__all__ = ["gate", "overview"]  # its modules
