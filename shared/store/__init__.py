"""Redis: the keyspace, the Lua scripts, and one store per kind of record.

Every read and write of Signoff's state goes through a store here (`bundle.Stores` wires
them for one Redis client); a Redis failure surfaces as `StorageError`.
"""
