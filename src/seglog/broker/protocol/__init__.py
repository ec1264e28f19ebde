"""The Kafka wire protocol, below everything else in the broker: request framing and
headers (``framing``), API keys by name (``api_keys``), the bounded reader every parser
uses (``reader``), the array-count walk run before decoding (``bounds``), null checks
(``nulls``), Produce parsed in place (``produce_wire``), the one table mapping storage
errors to Kafka error codes (``errors``), and the client side of the same framing: a
blocking connection with TLS and SASL (``client``; Spark's raw reader and sink, tests).
Bytes in, bytes out: no broker state."""
