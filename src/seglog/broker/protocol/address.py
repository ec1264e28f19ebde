"""``HOST:PORT`` text as ``(host, port)``: the one parser of a Kafka address, for both sides
of the wire (a client's ``bootstrap.servers`` entries, the broker's listeners and its
``--*-listen`` flags). Kept apart from ``client`` so that a command parsing a flag does not
import the wire client."""

from __future__ import annotations

__all__ = ["split_host_port"]


def split_host_port(text: str, default_port: int = 9092) -> tuple[str, int]:
    """``"HOST:PORT"`` / ``"HOST"`` / ``":PORT"`` / ``"[::1]:PORT"`` (spaces around it
    ignored) as ``(host, port)``: host 127.0.0.1 when empty, ``default_port`` when no port
    is given (a bare IPv6 address needs its brackets and a port). Raises ValueError for a
    port that is not a number in [0, 65535]."""
    host, sep, port_text = text.strip().rpartition(":")
    if not sep:
        host, port_text = port_text, str(default_port)
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    port = int(port_text)
    if not 0 <= port <= 65535:
        raise ValueError(f"port out of range: {port}")
    return host or "127.0.0.1", port
