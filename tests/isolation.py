"""Keeps parallel test processes (pytest-xdist's workers) out of each other's way.

Loaded with ``-p tests.isolation`` (pyproject's addopts), so it runs before pytest-django reads the settings: each
worker gets a Redis database of its own (the broker's index + 1 + the worker's number), so a real Celery worker
started by one test process never takes the tasks of another's, and a test that empties its broker empties only
its own. pytest-django already gives each worker a database of its own (``test_<name>_gw<n>``).
"""

import os
import re

_worker = os.environ.get("PYTEST_XDIST_WORKER", "")
_broker = os.environ.get("CELERY_BROKER_URL", "")
if _worker.startswith("gw") and _broker.startswith("redis"):
    number = int(_worker[2:])
    match = re.fullmatch(r"(redis://[^/]*)(?:/(\d+))?", _broker)
    if match is None:
        raise RuntimeError(f"CELERY_BROKER_URL {_broker!r}: expected redis://host:port/<db> to give each worker a db")
    base = int(match.group(2) or 0)
    os.environ["CELERY_BROKER_URL"] = f"{match.group(1)}/{base + 1 + number}"
