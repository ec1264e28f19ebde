"""Record batches v2 as bytes (Kafka's DefaultRecordBatch): the header layout and checks,
the vectorised encoder, the columnar decoder, varints and ``Message``. Imports nothing
else from storage."""
