"""A batch's items as people work with them, pure: input lines and CSV rows as items, an
item's result and its export as JSON lines or CSV, and which ended items a retry takes."""
