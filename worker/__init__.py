"""The worker: the Celery app, the turn runtime, and one folder per feature it runs."""
