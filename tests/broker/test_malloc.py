"""glibc malloc settings of the broker process (``seglog._malloc.tune_malloc``): freed fetch-sized
buffers stay mapped instead of being returned to the kernel and faulted in again."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from tests._security import server_cert

from seglog.broker import free_port, start_broker

_CHURN = """
import os, resource, sys
from seglog._malloc import tune_malloc
applied = tune_malloc() if sys.argv[1] == "tuned" else False
def fetch_like():  # the pread result, the TLS BIO copy, the bytes read out of it
    a = os.urandom(1 << 20); b = bytes(a); c = bytearray(b)
    del a, b, c
fetch_like()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(50):
    fetch_like()
print(applied, (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 50)
"""

glibc_only = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc malloc"
)


def _faults_per_round(mode: str, env: dict[str, str] | None = None) -> tuple[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", _CHURN, mode], capture_output=True, text=True, check=True, env=env
    ).stdout.split()
    return out[0], float(out[1])


@glibc_only
def test_tuned_heap_keeps_fetch_buffers_mapped() -> None:
    applied, tuned = _faults_per_round("tuned")
    _, default = _faults_per_round("default")
    assert applied == "True"
    assert default > 200  # 3 x 1 MiB faulted in again every time (~480 pages)
    assert tuned < 50


@glibc_only
def test_env_switch_leaves_defaults() -> None:
    env = {**os.environ, "SEGLOG_MALLOC_TUNING": "0"}
    applied, faults = _faults_per_round("tuned", env)
    assert applied == "False"
    assert faults > 200


def _minor_faults(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[7])


@glibc_only
def test_tls_fetches_do_not_fault_their_buffers_in_again(tmp_path: Path) -> None:
    """A real broker serving 1 MiB fetches over TLS to librdkafka: page faults per MB
    sent stay near zero (~470 per MB when freed buffers went back to the kernel)."""
    server_cert(tmp_path, "127.0.0.1")
    ports = {"PLAINTEXT": free_port(), "SSL": free_port()}
    proc = start_broker(
        tmp_path / "data",
        port=ports["PLAINTEXT"],
        extra_args=[
            "--listeners", ",".join(f"{p}://127.0.0.1:{q}" for p, q in ports.items()),
            "--ssl-certfile", str(tmp_path / "server.pem"),
        ],
    )  # fmt: skip
    try:
        conf = {
            "bootstrap.servers": f"127.0.0.1:{ports['SSL']}",
            "security.protocol": "SSL",
            "ssl.ca.location": str(tmp_path / "ca.pem"),
        }
        count, value = 32_000, b"x" * 1024
        producer = Producer({**conf, "linger.ms": 5})
        for _ in range(count):
            producer.produce("churn", value)
            producer.poll(0)
        assert producer.flush(30) == 0
        consumer = Consumer({**conf, "group.id": "churn", "enable.auto.commit": False})
        consumer.assign([TopicPartition("churn", 0, 0)])
        got, before = 0, _minor_faults(proc.process.pid)
        try:
            while got < count:
                batch = consumer.consume(1000, 10)
                assert batch, f"no records after {got}"
                got += sum(1 for m in batch if m.error() is None)
        finally:
            consumer.close()
        per_mb = (_minor_faults(proc.process.pid) - before) / (count * len(value) / 1e6)
    finally:
        assert proc.stop() == 0, proc.log_text()
    assert per_mb < 100, f"{per_mb:.0f} page faults per MB fetched"
