"""Parsing shared by the cost commands: months and dates, with errors that name the argument."""

from datetime import UTC, datetime

from django.core.management.base import CommandError

from governance.lib.months import Month


def month_arg(text: str) -> Month:
    try:
        return Month.parse(text)
    except ValueError as exc:
        raise CommandError(f"MONTH: {exc}") from None


def moment_arg(text: str, name: str = "--valid-from") -> datetime:
    """A date (midnight UTC) or an ISO 8601 time; a time without zone is UTC."""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise CommandError(f"{name}: {text!r} is not a date (YYYY-MM-DD) or ISO 8601 time") from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def errors_of(exc: Exception) -> str:
    messages = getattr(exc, "messages", None)
    return "; ".join(messages) if messages else str(exc)
