"""A Spark standalone cluster on loopback, from pyspark's own launcher (``bin/spark-class``).

One master and ``workers`` workers, each a JVM of its own with its own work directory;
executors the workers start are JVMs of their own too, each with its own Python workers.
Every process started is stopped (SIGTERM, then SIGKILL) when the context exits.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pyspark
from tests._wait import wait_until

from seglog.broker import free_port

SPARK_HOME = Path(pyspark.__file__).parent


@dataclass
class Cluster:
    """A running standalone cluster: ``master_url`` is ``spark://127.0.0.1:PORT``."""

    master_url: str
    ui_url: str
    work_dirs: list[Path]
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def state(self) -> dict[str, object]:
        """The master's JSON status page (workers, applications)."""
        with urllib.request.urlopen(f"{self.ui_url}/json/", timeout=10) as response:
            return json.loads(response.read())  # type: ignore[no-any-return]

    def executor_dirs(self) -> list[Path]:
        """``<work dir>/<app id>/<executor id>`` of every executor the workers started."""
        return sorted(p for w in self.work_dirs for p in w.glob("app-*/*") if p.is_dir())


def _spark_class(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1"}
    with log.open("wb") as out:
        return subprocess.Popen(
            [str(SPARK_HOME / "bin" / "spark-class"), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(20)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(20)


@contextmanager
def standalone_cluster(
    root: Path, workers: int = 2, cores: int = 1, memory: str = "1g", timeout_s: float = 90
) -> Iterator[Cluster]:
    """Start a master and ``workers`` workers under ``root``; yield once all are ALIVE.

    Raises RuntimeError (with the logs' tails) when they do not register within
    ``timeout_s`` seconds."""
    port, ui_port = free_port(), free_port()
    master_url = f"spark://127.0.0.1:{port}"
    cluster = Cluster(master_url, f"http://127.0.0.1:{ui_port}", [])
    logs: list[Path] = []
    root.mkdir(parents=True, exist_ok=True)
    try:
        logs.append(root / "master.log")
        cluster.processes.append(
            _spark_class(
                ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                 "--port", str(port), "--webui-port", str(ui_port)],
                logs[-1],
            )
        )  # fmt: skip
        for i in range(workers):
            work = root / f"worker-{i}"
            work.mkdir(parents=True)
            cluster.work_dirs.append(work)
            logs.append(root / f"worker-{i}.log")
            cluster.processes.append(
                _spark_class(
                    ["org.apache.spark.deploy.worker.Worker", master_url, "--host", "127.0.0.1",
                     "--cores", str(cores), "--memory", memory, "--work-dir", str(work),
                     "--webui-port", str(free_port())],
                    logs[-1],
                )
            )  # fmt: skip

        def not_started() -> str:
            tails = "\n".join(f"--- {log}\n{log.read_text()[-2000:]}" for log in logs)
            return f"the standalone cluster did not start:\n{tails}"

        def all_alive() -> bool:
            assert all(p.poll() is None for p in cluster.processes), not_started()
            state = cluster.state()  # type: ignore[attr-defined]
            return len([w for w in state["workers"] if w["state"] == "ALIVE"]) == workers

        wait_until(all_alive, timeout_s, interval=0.5, message=not_started, ignore=(OSError,))
        yield cluster
    finally:
        for process in reversed(cluster.processes):
            _stop(process)
