"""Routes in the worker: the notifier thread that matches new requests to routes, and the
email task that sends each (see `notifier.py`, `email.py`, `tasks.py`)."""

__all__ = ["email", "notifier", "tasks"]  # its modules
