"""Filter types shared by every domain's filtersets."""

from datetime import UTC, date, datetime

from django import forms
from django_filters import rest_framework as filters
from django_filters.fields import IsoDateTimeField

OUT_OF_RANGE = "This time cannot be expressed in UTC; use a time between years 1 and 9999."


class UtcIsoDateTimeField(IsoDateTimeField):
    """ISO 8601, converted to UTC (PostgreSQL refuses offsets past 15:59 that Python accepts)."""

    def to_python(self, value: str | datetime | date | None) -> datetime | None:
        parsed = super().to_python(value)
        try:
            return parsed.astimezone(UTC) if parsed is not None and parsed.tzinfo else parsed
        except OverflowError:
            raise forms.ValidationError(OUT_OF_RANGE, code="invalid") from None


class UtcIsoDateTimeFilter(filters.IsoDateTimeFilter):
    field_class = UtcIsoDateTimeField
