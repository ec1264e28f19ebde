"""Crash-test subscriber: publishes a few messages, then fetches and acknowledges until
SIGKILLed (``tests/crash/test_subscription_kill9.py``); publishes 10 more whenever
everything published is acknowledged.

Usage: ``_sub_writer.py <partition dir> <seed>``. Lines on stdout, each written once the
call it reports returned (one ``os.write`` each, atomic on a pipe):

- ``ready`` once the subscription is open;
- ``deliver <offset> <redelivery count>`` for every delivery ``fetch`` returned;
- ``acking <offsets...>`` before an ``ack`` call, ``acked <offsets...>`` after it returned.
"""

from __future__ import annotations

import os
import random
import sys

from seglog.storage import Message, open_log

NAME = "crash"
ACK_WAIT_MS = 40
MAX_IN_FLIGHT = 64


def main() -> None:
    path, seed = sys.argv[1], int(sys.argv[2])
    rng = random.Random(seed)
    out = sys.stdout.fileno()
    log = open_log(path, create=True, segment_bytes=4096)
    start = log.next_offset()
    log.publish([Message(key=b"k", value=b"m%d" % o) for o in range(start, start + 30)])
    sub = log.subscribe(NAME, ack_wait_ms=ACK_WAIT_MS, max_in_flight=MAX_IN_FLIGHT)
    os.write(out, b"ready\n")
    held: list[int] = []
    while True:
        got = sub.fetch(rng.randint(1, 10), 0.01)
        for d in got:
            os.write(out, b"deliver %d %d\n" % (d.offset, d.redelivery_count))
            if rng.random() < 0.6:
                held.append(d.offset)
        if not got and not held and not sub.pending():
            # everything published is acknowledged: publish more, else the test waits
            # for acks that never come (it kills after a random number of acks)
            end = log.next_offset()
            log.publish([Message(key=b"k", value=b"m%d" % o) for o in range(end, end + 10)])
        if held and rng.random() < 0.5:
            k = rng.randint(1, len(held))
            batch, held = sorted(set(held[:k])), held[k:]
            line = b" ".join(b"%d" % o for o in batch)
            os.write(out, b"acking " + line + b"\n")
            sub.ack(batch)
            os.write(out, b"acked " + line + b"\n")


if __name__ == "__main__":
    main()
