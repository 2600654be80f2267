"""Serializer fields shared by every domain's query and body serializers."""

from datetime import datetime

from rest_framework import serializers

from governance.api.filters import OUT_OF_RANGE
from governance.lib.ranges import year_problem


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
