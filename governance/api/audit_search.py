"""Finding audit entries (actor, kind, object, door, time range) and writing them as CSV: one definition for the
API (/api/v1/audit/) and the admins' page (/audit/)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator
from datetime import UTC

from django.db.models import Q, QuerySet
from django_filters import rest_framework as filters

from governance.api.filters import UtcIsoDateTimeFilter
from governance.api.models import AuditEntry
from governance.lib.text import csv_safe

CSV_HEADERS = ["at", "door", "where", "address", "actor", "token", "action", "kind", "object_id", "object",
               "changes"]  # fmt: skip


class AuditEntryFilter(filters.FilterSet):
    """`actor`: a user's or a token's name; `kind`: app_label.model (`costs.ratecard`); `object`: an object's id,
    or part of its label; `since`/`until`: ISO 8601 (UTC if no offset)."""

    actor = filters.CharFilter(method="by_actor", max_length=200)
    kind = filters.CharFilter(field_name="model", max_length=100)
    object = filters.CharFilter(method="by_object", max_length=200)
    door = filters.ChoiceFilter(choices=AuditEntry.Door.choices)
    since = UtcIsoDateTimeFilter(field_name="at", lookup_expr="gte")
    until = UtcIsoDateTimeFilter(field_name="at", lookup_expr="lt")

    class Meta:
        model = AuditEntry
        fields = ["action", "model", "object_pk", "actor", "kind", "object", "door", "since", "until"]

    def by_actor(self, queryset: QuerySet[AuditEntry], name: str, value: str) -> QuerySet[AuditEntry]:
        return queryset.filter(Q(actor_name__iexact=value) | Q(token_name__iexact=value))

    def by_object(self, queryset: QuerySet[AuditEntry], name: str, value: str) -> QuerySet[AuditEntry]:
        return queryset.filter(Q(object_pk=value) | Q(object_repr__icontains=value))


def audit_csv_row(entry: AuditEntry) -> list[object]:
    changes = json.dumps(entry.changes, sort_keys=True, ensure_ascii=False)
    cells = [
        entry.at.astimezone(UTC).isoformat().replace("+00:00", "Z"), entry.door, entry.where, entry.address or "",
        entry.actor_name, entry.token_name, entry.action, entry.model, entry.object_pk, entry.object_repr, changes,
    ]  # fmt: skip
    return [csv_safe(c) for c in cells]


def audit_csv(entries: Iterable[AuditEntry]) -> Iterator[str]:
    """The entries as CSV, streamed: times ISO 8601 UTC, text a spreadsheet would run as a formula quoted."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(CSV_HEADERS)
    for n, entry in enumerate(entries, 1):
        writer.writerow(audit_csv_row(entry))
        if n % 500 == 0:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()
