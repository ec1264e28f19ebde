"""Test tiers, by marker (declared in pyproject's ``[tool.pytest.ini_options] markers``).

Applied here from where a test lives and what it starts, so a new test lands in the right
tier without remembering a decorator:

- ``spark``: under ``tests/spark`` (or marked by hand): a SparkSession (a JVM). They share
  the ``xdist_group`` "spark", so under ``pytest -n N --dist loadgroup`` they all run in one
  worker, with one SparkSession;
- ``crash``: under ``tests/crash``: kill -9, power-loss and FUSE fault harnesses;
- ``broker``: starts a real ``seglog serve`` subprocess (the ``broker_process`` or
  ``broker_factory`` fixtures, ``start_broker`` called by the test module, or a console
  server);
- ``slow``: marked by hand, a test that takes more than ~2 s on its own.

``make test-fast`` runs what none of these mark (unit and in-process tests), in parallel.
"""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).parent
BY_DIRECTORY = {"spark": "spark", "crash": "crash", "console": "broker"}
BROKER_FIXTURES = {"broker_process", "broker_factory"}


def _starts_broker(item: pytest.Item) -> bool:
    if BROKER_FIXTURES.intersection(getattr(item, "fixturenames", ())):
        return True
    module = getattr(item, "module", None)
    return module is not None and "start_broker" in vars(module)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    xdist = config.pluginmanager.hasplugin("xdist")
    for item in items:
        path = Path(item.path)
        if path.is_relative_to(TESTS) and len(path.relative_to(TESTS).parts) > 1:
            marker = BY_DIRECTORY.get(path.relative_to(TESTS).parts[0])
            if marker is not None:
                item.add_marker(marker)
        if item.get_closest_marker("broker") is None and _starts_broker(item):
            item.add_marker("broker")
        if xdist and item.get_closest_marker("spark") is not None:
            item.add_marker(pytest.mark.xdist_group("spark"))
