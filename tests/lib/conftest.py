from collections.abc import Iterator

import pytest

from tests.replica_server import replica_started


@pytest.fixture(scope="package")
def replica_port(django_db_blocker) -> Iterator[int]:
    """A hot standby of the test server, streaming from it, on a port of its own (tests/replica_server.py)."""
    with django_db_blocker.unblock():
        yield from replica_started()
