"""`python -m faults [--quick] [--only NAME ...]`: run the fault experiments, write the table.

The table goes to stdout and into docs/reliability.md (between this size's markers, with the
date, the core count and the command). The exit status is 1 when any invariant failed.
"""

from __future__ import annotations

import argparse
import importlib
import json
import random
import shlex
import shutil
import sys
import tempfile
import time
import traceback
from dataclasses import asdict
from pathlib import Path

from faults.report import DOC, Result, render, write_section

EXPERIMENTS = {
    "kill_storm": "kill storm",
    "redis_restart": "Redis SIGKILL mid-batch",
    "concurrent_resolves": "concurrent resolves",
    "expiry_without_worker": "expiry with no worker",
}


def _arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m faults", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="CI sizes: a minute or two")
    parser.add_argument("--only", nargs="+", choices=sorted(EXPERIMENTS), default=None)
    parser.add_argument("--seed", type=int, default=None, help="for the random kill moments")
    parser.add_argument("--doc", type=Path, default=DOC, help="the file the table goes to")
    parser.add_argument("--no-doc", action="store_true", help="print the table only")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    parser.add_argument("--keep", action="store_true", help="keep the data and logs directory")
    return parser.parse_args(argv)


def _run_one(module_name: str, quick: bool, workdir: Path, rng: random.Random) -> Result:
    """One experiment; one that raises is a failed result carrying the error."""
    module = importlib.import_module(f"faults.{module_name}")
    started = time.monotonic()
    try:
        result: Result = module.run(module.QUICK if quick else module.FULL, workdir, rng)
    except Exception as exc:  # the table must still be written, with what broke
        traceback.print_exc()
        result = Result(EXPERIMENTS[module_name], "-")
        result.fail(f"the experiment raised {type(exc).__name__}: {str(exc)[:300]}")
    result.seconds = time.monotonic() - started
    return result.close()


def main(argv: list[str]) -> int:
    args = _arguments(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    rng = random.Random(seed)  # noqa: S311 - kill moments, not secrets
    workdir = Path(tempfile.mkdtemp(prefix="signoff-faults-"))
    started = time.monotonic()
    results = []
    try:
        for name in args.only or EXPERIMENTS:
            print(f"== {EXPERIMENTS[name]}", flush=True)
            results.append(_run_one(name, args.quick, workdir, rng))
            print(render(results[-1:]), flush=True)
    finally:
        if args.keep or not all(r.passed for r in results):
            print(f"data and logs kept in {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    seconds = time.monotonic() - started
    table = render(results) + f"\nRandom seed {seed} (`--seed {seed}` makes the same choices).\n"
    print(table)
    if args.json is not None:
        args.json.write_text(json.dumps([asdict(r) | {"passed": r.passed} for r in results]))
    if not args.no_doc:
        command = shlex.join(["python", "-m", "faults", *argv])
        size = "quick" if args.quick else "full"
        write_section(args.doc, size, table, command=command, seconds=seconds)
    return 0 if all(r.passed for r in results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
