"""Retention and archive: finished conversations leave Redis for compressed files.

An operator sets how long a finished conversation stays (`retention`); the scheduler's
archiver writes each one past it to a file and only then removes it from Redis
(`archiver`), so a crash at any point loses nothing and archives nothing twice. A file is
one JSON line per Redis key of the conversation (`snapshot`): exact enough to restore.
"""
