"""The console's batches: the progress bar, the submit form's input, the overview, results."""

__all__ = ["bar", "input", "overview", "results"]  # its modules
