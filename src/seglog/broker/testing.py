"""Start a real ``seglog serve`` subprocess (tests, demo, benchmarks).

with start_broker(tmp_path / "data") as broker:
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

__all__ = ["BrokerProcess", "free_port", "start_broker"]


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` right now (another process may still take it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _seglog_command() -> list[str]:
    exe = Path(sys.executable).with_name("seglog")
    if exe.exists():
        return [str(exe)]
    return [sys.executable, "-c", "from seglog.cli import main; main()"]


class BrokerProcess:
    """A running ``seglog serve``; ``bootstrap`` is ``"127.0.0.1:PORT"``. Its log (stdout
    and stderr) goes to ``log_path``, outside the data directory."""

    def __init__(
        self, process: subprocess.Popen[bytes], port: int, log_path: Path, data_dir: Path
    ) -> None:
        self.process = process
        self.data_dir = data_dir
        self.port = port
        self.host = "127.0.0.1"
        self.bootstrap = f"{self.host}:{port}"
        self.log_path = log_path
        self.returncode: int | None = None

    def log_text(self) -> str:
        """Everything the broker logged so far."""
        return self.log_path.read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20.0) -> int:
        """Send ``sig`` (SIGTERM: clean shutdown), wait, return the exit code. SIGKILL
        after ``timeout`` seconds (then raises RuntimeError). Idempotent."""
        if self.returncode is not None:
            return self.returncode
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            self.returncode = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.returncode = self.process.wait()
            raise RuntimeError(f"broker did not exit within {timeout}s of signal {sig}") from None
        return self.returncode

    def kill(self) -> int:
        """SIGKILL (a crash, no clean shutdown)."""
        return self.stop(signal.SIGKILL)

    def __enter__(self) -> BrokerProcess:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _wait_accepting(proc: subprocess.Popen[bytes], port: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return True
        time.sleep(0.05)
    return False


def start_broker(
    data_dir: str | os.PathLike[str],
    port: int | None = None,
    extra_args: Sequence[str] = (),
    *,
    timeout: float = 30.0,
    log_path: str | os.PathLike[str] | None = None,
) -> BrokerProcess:
    """Start ``seglog serve --data-dir DATA_DIR --listen 127.0.0.1:PORT EXTRA_ARGS`` and
    wait until it accepts connections. ``port`` None picks a free port (retried if another
    process grabs it first). Raises RuntimeError with the broker's log if it does not come
    up within ``timeout`` seconds."""
    attempts = 3 if port is None else 1
    last_log = ""
    for _ in range(attempts):
        chosen = free_port() if port is None else port
        if log_path is None:
            fd, name = tempfile.mkstemp(prefix="seglog-broker-", suffix=".log")
            os.close(fd)
            path = Path(name)
        else:
            path = Path(log_path)
        cmd = [
            *_seglog_command(),
            "serve",
            "--data-dir",
            os.fspath(data_dir),
            "--listen",
            f"127.0.0.1:{chosen}",
            *extra_args,
        ]
        with path.open("ab") as log_file:
            proc = subprocess.Popen(cmd, stdout=log_file, stderr=subprocess.STDOUT)
        if _wait_accepting(proc, chosen, timeout):
            return BrokerProcess(proc, chosen, path, Path(data_dir))
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        last_log = path.read_text(errors="replace")
        if "address already in use" not in last_log.lower():
            break
    raise RuntimeError(f"seglog serve did not start; its log:\n{last_log}")
