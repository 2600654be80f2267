"""Serializer fields shared by every domain's query and body serializers."""

from datetime import datetime

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from governance.api.filters import OUT_OF_RANGE
from governance.lib.months import Month
from governance.lib.ranges import year_problem

# What Month.parse takes, for the schema: YYYY-MM of a year from 1970 to 2199.
MONTH_PATTERN = r"^(19[7-9][0-9]|20[0-9]{2}|21[0-9]{2})-(0[1-9]|1[0-2])$"


class BoundedDateTimeField(serializers.DateTimeField):
    """ISO 8601 in UTC, within the years any usage can be from (1970-2199); never an overflow (a 500)."""

    def to_internal_value(self, value: datetime | str) -> datetime:
        try:
            moment = super().to_internal_value(value)
        except OverflowError:
            raise serializers.ValidationError(OUT_OF_RANGE) from None
        problem = year_problem(moment)
        if problem:
            raise serializers.ValidationError(problem)
        return moment


@extend_schema_field({"type": "string", "pattern": MONTH_PATTERN, "example": "2026-11"})
class MonthField(serializers.CharField):
    """'YYYY-MM' of a year from 1970 to 2199 (lib.months.Month.parse decides); the text is kept as given."""

    def to_internal_value(self, data: str) -> str:
        text = super().to_internal_value(data)
        try:
            Month.parse(text)
        except ValueError as exc:
            raise serializers.ValidationError(str(exc)) from None
        return text.strip()
