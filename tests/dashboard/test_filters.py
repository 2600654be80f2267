from datetime import UTC, datetime

import pytest

from governance.dashboard.filters import filters_parse
from governance.lib.months import Month

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 11, 17, 12, tzinfo=UTC)


def test_without_filters_it_shows_the_current_month_of_every_visible_team(cast):
    f = filters_parse(query={}, user=cast.nlp_lead, now=NOW)

    assert f.month == Month(2026, 11) and f.start == Month(2026, 11).start and f.end == Month(2026, 12).start
    assert f.team is None and list(f.teams) == [cast.nlp] and f.errors == []


def test_a_time_range_is_inclusive_of_its_last_day(cast):
    f = filters_parse(query={"start": "2026-11-03", "end": "2026-11-04"}, user=cast.admin, now=NOW)

    assert f.start == datetime(2026, 11, 3, tzinfo=UTC) and f.end == datetime(2026, 11, 5, tzinfo=UTC)
    assert f.period == "2026-11-03 to 2026-11-04"
    assert "start=2026-11-03&end=2026-11-04" in f.query()


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"month": "Nov"}, "month 'Nov' is not of the form YYYY-MM"),
        ({"start": "3/11/2026"}, "start '3/11/2026' is not a date"),
        ({"start": "2026-11-05", "end": "2026-11-01"}, "the time range ends before it starts"),
        ({"cluster": "nowhere"}, "cluster 'nowhere' does not exist"),
        ({"team": "vision"}, "team 'vision' is not one you may see"),
    ],
)
def test_a_bad_filter_is_named_and_ignored(cast, query, message):
    f = filters_parse(query=query, user=cast.alice, now=NOW)

    assert any(message in e for e in f.errors)
    assert f.team is None and f.month == Month(2026, 11)


def test_a_time_range_without_a_month_takes_the_month_it_starts_in(cast):
    f = filters_parse(query={"start": "2026-10-30", "end": "2026-11-02"}, user=cast.admin, now=NOW)

    assert f.month == Month(2026, 10)
