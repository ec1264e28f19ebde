"""A consume-transform-produce application with exactly-once output (KIP-98/447), run as
a subprocess by ``test_transactions_crash.py`` so that it can be killed with SIGKILL:
``python _txn_app.py BOOTSTRAP SOURCE SINK TRANSACTIONAL_ID GROUP DELAY_S``.

Each loop reads up to 10 records of SOURCE partition 0 (read_committed), writes
``b"out-" + value`` to SINK partition 0 and the next source offset to GROUP in one
transaction, staying DELAY_S seconds inside it before committing (so that a kill lands in
an open transaction). Any error ends the process (the test starts it again: the new instance's
InitProducerId fences the old one and aborts its open transaction)."""

from __future__ import annotations

import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition


def main() -> None:
    bootstrap, source, sink, txn_id, group, delay = sys.argv[1:7]
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
        "isolation.level": "read_committed", "auto.offset.reset": "earliest",
    })  # fmt: skip
    producer = Producer({
        "bootstrap.servers": bootstrap, "transactional.id": txn_id,
        "transaction.timeout.ms": 4000,
    })  # fmt: skip
    producer.init_transactions(60)
    start = consumer.committed([TopicPartition(source, 0)], 60)[0].offset
    consumer.assign([TopicPartition(source, 0, max(start, 0))])
    print("started at", start, flush=True)
    while True:
        messages = [m for m in consumer.consume(10, 1.0) if m.error() is None]
        if not messages:
            continue
        producer.begin_transaction()
        for m in messages:
            producer.produce(sink, key=m.key(), value=b"out-" + m.value(), partition=0)
        producer.flush(60)
        time.sleep(float(delay))
        position = [TopicPartition(source, 0, messages[-1].offset() + 1)]
        producer.send_offsets_to_transaction(position, consumer.consumer_group_metadata(), 60)
        producer.commit_transaction(60)
        print("committed up to", position[0].offset, flush=True)


if __name__ == "__main__":
    main()
