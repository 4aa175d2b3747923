"""A batch's side of a turn: its counts as items park, resume and end, and its end event."""

__all__ = ["end", "hooks"]  # its modules
