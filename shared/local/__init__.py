"""Processes on this machine: the embedded redis-server and children that die with us."""
