"""Confluent Schema Registry's REST API v1 served by the broker process
(``seglog serve --schema-registry-listen``): the HTTP resources (``routes``), HTTP Basic
authentication against the broker's SCRAM users and ACLs (``access``), and the server
run on the broker's event loop (``service``). The registry itself is ``seglog.schemas``."""
