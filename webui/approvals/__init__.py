"""The approvals inbox: its filters and rows, bulk resolution, and the form built from a schema."""

__all__ = ["access", "bulk", "inbox", "rows", "schema_form"]  # its modules
