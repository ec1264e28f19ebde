"""Broker configuration: ``BrokerConfig`` (``broker_config``), the one settings table of
flags, ``server.properties`` keys, defaults and topic configs (``settings``), and listener
parsing (``listeners``)."""
