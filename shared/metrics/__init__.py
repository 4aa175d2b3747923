"""Prometheus metrics: every series (`series.py`), their bounded labels (`labels.py`), the
gauges read from Redis at scrape time (`state.py`), one directory of metric files per run
(`runs.py`), and the port the worker and beat serve them on (`server.py`).

docs/observability.md lists the series and how to scrape them.
"""
