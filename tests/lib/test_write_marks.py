"""A user's read-your-writes mark (governance/lib/replica.py, api.WriteMark): where the primary's WAL stood after
the user's last write. It only moves forward, so two writes of one user answered out of order cannot leave the
earlier position, and a read that trusted it reach a replica that has not replayed the later write."""

from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import F
from django.utils import timezone

from governance.api.models import WriteMark
from governance.api.tasks import purge_write_marks
from governance.lib.replica import MARK_TTL_S, _lsn_text, _primary_lsn, user_mark, user_mark_write

pytestmark = [
    pytest.mark.skipif(connection.vendor != "postgresql", reason="a WAL position is PostgreSQL's"),
    pytest.mark.django_db,
]


def _position(lsn: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT (%s::pg_lsn - '0/0'::pg_lsn)::bigint", [lsn])
        return int(cursor.fetchone()[0])


@pytest.mark.parametrize("position", [0, 1, 0xFFFFFFFF, 2**32, 0x16B3748, 0x1_0000_0001, 2**63 - 1])
def test_a_position_is_written_as_postgresql_writes_a_pg_lsn(position):
    assert _position(_lsn_text(position)) == position
    with connection.cursor() as cursor:
        cursor.execute("SELECT ('0/0'::pg_lsn + %s::numeric)::text", [position])
        assert _lsn_text(position) == cursor.fetchone()[0]


def test_a_mark_is_where_the_primary_stood_after_the_write_and_lasts_as_long_as_the_cookie(cast):
    before = _primary_lsn()

    mark = user_mark_write(cast.nlp_lead.pk)

    assert _position(mark) >= _position(before)
    assert user_mark(cast.nlp_lead.pk) == mark and user_mark(cast.finance.pk) is None
    lasts = WriteMark.objects.get(user=cast.nlp_lead).until - timezone.now()
    assert timedelta(seconds=MARK_TTL_S - 60) < lasts <= timedelta(seconds=MARK_TTL_S)


def test_a_mark_never_moves_back_when_two_writes_are_answered_out_of_order(cast):
    user_mark_write(cast.nlp_lead.pk)
    # A second write of the same user, in flight at once, marked a later position first (here: 1 GiB of WAL on).
    WriteMark.objects.filter(user=cast.nlp_lead).update(lsn=F("lsn") + 2**30)
    later = _lsn_text(WriteMark.objects.get(user=cast.nlp_lead).lsn)

    kept = user_mark_write(cast.nlp_lead.pk)  # the earlier write's mark, answered last

    assert kept == later and user_mark(cast.nlp_lead.pk) == later


def test_a_mark_past_its_time_sends_no_read_to_the_primary_and_is_purged(cast):
    user_mark_write(cast.nlp_lead.pk)
    user_mark_write(cast.finance.pk)
    WriteMark.objects.filter(user=cast.nlp_lead).update(until=timezone.now() - timedelta(seconds=1))

    assert user_mark(cast.nlp_lead.pk) is None and user_mark(cast.finance.pk) is not None
    assert purge_write_marks() == 1
    assert list(WriteMark.objects.values_list("user", flat=True)) == [cast.finance.pk]


def test_a_mark_for_a_user_deleted_by_the_request_itself_is_written_and_goes_with_the_next_purge(cast):
    gone = cast.nlp_lead.pk
    cast.nlp_lead.delete()
    with connection.cursor() as cursor:  # as a request's own statement would be, committed at once
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")

    assert user_mark_write(gone)  # no foreign key to refuse it: the request that deleted its own user answers

    WriteMark.objects.filter(user_id=gone).update(until=timezone.now())
    assert purge_write_marks() == 1 and not WriteMark.objects.exists()
