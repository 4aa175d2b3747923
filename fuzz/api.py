"""Fuzz the JSON API from its OpenAPI document with schemathesis (CI: `make fuzz-quick`).

Starts its own redis-server, a worker and `signoff web` on free ports, creates an
operator token, then runs ``schemathesis run --checks all`` against
``/api/v1/openapi.json``: every server error, every schema-valid request the server
rejects and every schema-violating one it accepts is a finding. Schemathesis lives in
its own virtualenv (`.venv-fuzz`, made as docs/fuzzing.md says), so it never enters
the project's lock file; its settings are `fuzz/schemathesis.toml`, its hooks
`fuzz/hooks.py`, and it works in the run's temporary directory, not in the checkout.
docs/fuzzing.md has the last run's figures.

    python -m fuzz.api [--max-examples N] [-- extra schemathesis options]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

from shared.local.embedded_redis import EmbeddedRedis, free_port
from shared.models.users import Role
from shared.settings import Settings
from shared.store.connection import connect
from shared.store.keys import KeySpace
from shared.store.users import TokenStore

ROOT = Path(__file__).resolve().parent.parent
SCHEMATHESIS = ROOT / ".venv-fuzz" / "bin" / "schemathesis"
INSTALL = "python3 -m venv .venv-fuzz && .venv-fuzz/bin/pip install 'schemathesis==4.32.5'"
# Prompts go to this conversation (fuzz/schemathesis.toml names it), not only to ids that do
# not exist: their bodies are checked only once the conversation is found.
PROMPTS_TO = "fuzz-prompts"
# The agent the cases that must be accepted name (fuzz/hooks.py): a generated name is none.
AGENT = "fuzz-agent"
CONFIG = ROOT / "fuzz" / "schemathesis.toml"


def _serve(env: dict[str, str], log_dir: Path) -> list[subprocess.Popen[bytes]]:
    signoff = str(Path(sys.executable).with_name("signoff"))
    started = []
    for name, command in (("worker", [signoff, "worker"]), ("web", [signoff, "web"])):
        log = (log_dir / f"{name}.log").open("wb")
        started.append(
            subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
        )
    return started


def _wait_healthy(base: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise SystemExit(f"signoff web did not answer at {base}/healthz")


def _agent(base: str, token: str) -> None:
    answer = httpx.post(
        f"{base}/api/v1/agents",
        json={"name": AGENT, "system_prompt": "Answer briefly."},
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )
    if answer.status_code != 201:
        raise SystemExit(f"could not create agent {AGENT}: {answer.text}")


def _conversation_for_prompts(base: str, token: str) -> None:
    answer = httpx.post(
        f"{base}/api/v1/conversations",
        json={"conversation_id": PROMPTS_TO},
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )
    if answer.status_code != 201:
        raise SystemExit(f"could not create conversation {PROMPTS_TO}: {answer.text}")


def _schemathesis(base: str, token: str, work: Path, options: argparse.Namespace) -> list[str]:
    return [
        str(SCHEMATHESIS),
        "--config-file",
        str(CONFIG),
        "run",
        f"{base}/api/v1/openapi.json",
        "--checks",
        "all",
        "--max-examples",
        str(options.max_examples),
        "--header",
        f"Authorization: Bearer {token}",
        "--report-junit-path",
        str(work / "junit.xml"),
        *options.extra,
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-examples", type=int, default=200, help="Cases per operation.")
    parser.add_argument("extra", nargs="*", help="More schemathesis options (after --).")
    options = parser.parse_args()
    if not SCHEMATHESIS.exists():
        raise SystemExit(f"{SCHEMATHESIS} is missing; make it with: {INSTALL}")
    work = Path(tempfile.mkdtemp(prefix="signoff-fuzz-"))
    redis_server = EmbeddedRedis(data_dir=work / "redis").start()
    port = free_port()
    env = {
        **os.environ,
        "SIGNOFF_REDIS_URL": redis_server.url,
        "SIGNOFF_KEY_PREFIX": f"fuzz{uuid.uuid4().hex[:6]}",
        "SIGNOFF_WEB_PORT": str(port),
        "SIGNOFF_SECRET_KEY": uuid.uuid4().hex,
        "SIGNOFF_WEB_WORKERS": "1",
        # Generated URLs may name any address: the outbound guard is tested on its own
        # (tests/integration/test_outbound_guard.py), and no JSON Schema can say which host
        # resolves where.
        "SIGNOFF_OUTBOUND_ALLOW": "0.0.0.0/0,::/0",
        "SIGNOFF_MCP_ALLOWED_HOSTS": "0.0.0.0/0,::/0",
    }
    settings = Settings(redis_url=env["SIGNOFF_REDIS_URL"], key_prefix=env["SIGNOFF_KEY_PREFIX"])
    token = TokenStore(connect(settings), KeySpace.of(settings)).create("fuzz", Role.OPERATOR)
    processes = _serve(env, work)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(base)
        _conversation_for_prompts(base, token)
        _agent(base, token)
        command = _schemathesis(base, token, work, options)
        print(" ".join(c if "Bearer" not in c else "Authorization: Bearer ***" for c in command))
        hooks = {"SCHEMATHESIS_HOOKS": "fuzz.hooks", "PYTHONPATH": str(ROOT)}
        result = subprocess.run(command, cwd=work, env={**os.environ, **hooks}, check=False)
        print(f"logs of the worker and web server: {work}")
        return result.returncode
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=30)
        redis_server.stop()


if __name__ == "__main__":
    sys.exit(main())
