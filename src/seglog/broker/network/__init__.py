"""Sockets: one ``Connection`` per client (framing, in-order responses, back-pressure) and
the ``Broker`` (listeners, admission and limits, idle sweep, dispatch through the API
registry, start-up and clean shutdown)."""
