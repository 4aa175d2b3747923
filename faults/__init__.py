"""The fault suite: experiments that kill workers and Redis under load and check invariants.

`python -m faults` (`make faults`) runs them and writes docs/reliability.md; `--quick` is
the size CI runs (tests/integration/test_faults_quick.py).
"""
