"""The check run after every test (tests/leftovers.py, hooked in tests/conftest.py) finds rows another connection
committed, names their tables and empties them."""

import re

import pytest
from django.core.cache import cache
from django.db import connection

from governance.api.models import RateCount
from governance.org.models import Team
from tests.leftovers import RowsLeftBehind, check_left_behind, tables_with_rows


@pytest.mark.django_db(transaction=True)
def test_committed_rows_are_named_by_table_and_removed():
    RateCount.objects.create(key="left-behind", window_end=1, count=1)
    cache.set("left-behind", 1)  # the database cache's table, which the flush after a test does not empty

    left = "left committed in the test database once the test was over: api_ratecount, gg_cache."
    with pytest.raises(RowsLeftBehind, match=re.escape(left)) as raised:
        check_left_behind()

    assert "transaction=True" in str(raised.value)
    assert tables_with_rows() == [] and not RateCount.objects.exists()
    check_left_behind()  # nothing left: no error


@pytest.mark.skipif(connection.vendor != "postgresql", reason="on SQLite the check reads the test's own connection")
@pytest.mark.django_db
def test_what_the_tests_own_transaction_holds_is_not_counted(cast):
    """The test's rows are rolled back after it: the check, on a connection of its own, sees only committed rows."""
    assert Team.objects.exists()
    assert tables_with_rows() == []
