"""A job's history once it is on a bill: each known fact that changes (project, team, user, GPUs, start, end, a
finished job's state), with the old and the new value, when, through which door and by whom (a token for ingest).
Each changed job is an audit entry too, and a change to a finished job's team, GPUs or times is announced to the
leads of the teams whose bill it moves (the old team and the new), with the months it touches."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from django.utils import timezone

from collectors.records import TERMINAL_STATES
from governance.api.audit import audit_entries_write, door_fields
from governance.api.models import AuditEntry
from governance.lib.months import Month
from governance.notify.services import notification_enqueue
from governance.org.models import Project, Team
from governance.org.selectors import team_lead_emails
from governance.usage.models import JobChange

# The facts of a job its history follows: Job attribute -> JobChange field. The team follows from the project.
TRACKED = {
    "project_id": JobChange.Field.PROJECT, "user_name": JobChange.Field.USER, "gpus": JobChange.Field.GPUS,
    "start_time": JobChange.Field.START, "end_time": JobChange.Field.END, "state": JobChange.Field.STATE,
}  # fmt: skip
# What moves a finished job's bill from one team to another, or changes its size.
BILL_MOVING = {JobChange.Field.TEAM, JobChange.Field.GPUS, JobChange.Field.START, JobChange.Field.END}
EVENT = "job.changed"


@dataclass(frozen=True)
class JobVersion:
    """A job's facts before and after one write: `before` and `after` map Job attributes (TRACKED) to values."""

    pk: int
    ref: str
    before: Mapping[str, Any]
    after: Mapping[str, Any]


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    if value is None or isinstance(value, (str, int, bool)):
        return value
    if isinstance(value, Decimal):  # GPUs: a whole count as a number, a share of one GPU as its digits ("0.47")
        return int(value) if value == value.to_integral_value() else str(value.normalize())
    return str(value)


def _months(*moments: Any) -> list[str]:
    known = sorted(m for m in moments if isinstance(m, datetime))
    if not known:
        return []
    month, last, out = Month.of(known[0]), Month.of(known[-1]), []
    while month.start <= last.start:
        out.append(str(month))
        month = month.next()
    return out


def job_changes_record(*, versions: Iterable[JobVersion], now: datetime | None = None) -> list[JobChange]:
    """Record what changed on each job that had started before the write (a started job is on a bill)."""
    billed = [v for v in versions if v.before.get("start_time") is not None]
    if not billed:
        return []
    now = now or timezone.now()
    project_ids = {v.before.get("project_id") for v in billed} | {v.after.get("project_id") for v in billed}
    projects = {p.pk: p for p in Project.objects.filter(pk__in=project_ids - {None}).select_related("team")}
    who = door_fields()
    leads: dict[int, list[str]] = {}
    rows: list[JobChange] = []
    entries: list[tuple[object, str, dict[str, list[object]]]] = []
    for version in billed:
        changed = _changed(version, projects)
        if not changed:
            continue
        rows += [
            JobChange(job_id=version.pk, at=now, field=field, old_value=old, new_value=new, door=who["door"],
                      actor_name=(who.get("actor_name") or "")[:150], token_id=who.get("token_id"),
                      token_name=(who.get("token_name") or "")[:200])
            for field, (old, new) in changed.items()
        ]  # fmt: skip
        entries.append((version.pk, version.ref, {f: [o, n] for f, (o, n) in changed.items()}))
        if _finished(version.before) and BILL_MOVING & changed.keys():
            _announce(version, changed, projects, leads)
    JobChange.objects.bulk_create(rows)
    audit_entries_write(action=AuditEntry.Action.UPDATE, model="usage.job", objects=entries, at=now)
    return rows


def _changed(version: JobVersion, projects: Mapping[int, Project]) -> dict[str, tuple[Any, Any]]:
    """The facts that changed. A fact learnt for the first time (an end time, a GPU count) and a running job's
    normal end (running -> completed) are its life, not a change: only a known value replaced is one, and a
    project (or team) replaced or given to a job billed to no team."""
    changed: dict[str, tuple[Any, Any]] = {}
    for attr, field in TRACKED.items():
        old, new = version.before.get(attr), version.after.get(attr)
        first_known = old in (None, "") and attr != "project_id"
        if attr == "state" and old not in TERMINAL_STATES:
            continue
        if old != new and not first_known:
            if attr == "project_id":
                old, new = _project_slug(old, projects), _project_slug(new, projects)
            changed[field] = (_plain(old), _plain(new))
    old_team, new_team = _team(version.before, projects), _team(version.after, projects)
    if old_team != new_team:
        changed[JobChange.Field.TEAM] = (old_team.slug if old_team else None, new_team.slug if new_team else None)
    return changed


def _project_slug(pk: int | None, projects: Mapping[int, Project]) -> str | None:
    return projects[pk].slug if pk is not None and pk in projects else None


def _team(facts: Mapping[str, Any], projects: Mapping[int, Project]) -> Team | None:
    project = projects.get(facts.get("project_id"))  # type: ignore[arg-type]
    return project.team if project is not None else None


def _finished(facts: Mapping[str, Any]) -> bool:
    return facts.get("end_time") is not None or facts.get("state") in TERMINAL_STATES


def _announce(
    version: JobVersion, changed: Mapping[str, tuple[Any, Any]], projects: Mapping[int, Project],
    leads: dict[int, list[str]],
) -> None:  # fmt: skip
    """One outbox row per lead of the old and the new team (`leads`: each team's addresses, filled as needed)."""
    teams = [t for t in (_team(version.before, projects), _team(version.after, projects)) if t is not None]
    teams = list({t.pk: t for t in teams}.values())
    months = _months(*(version.before.get(k) for k in ("start_time", "end_time")),
                     *(version.after.get(k) for k in ("start_time", "end_time")))  # fmt: skip
    what = "; ".join(f"{field}: {old if old is not None else '-'} -> {new if new is not None else '-'}"
                     for field, (old, new) in changed.items())  # fmt: skip
    names = " and ".join(t.name for t in teams) or "no team"
    text = (f"Job {version.ref}, finished, changed after it was billed ({what}). This moves the bill of {names}"
            f" for {', '.join(months)}.")  # fmt: skip
    payload = {
        "job": version.ref, "job_id": version.pk, "months": months, "month": months[0] if months else None,
        "teams": [t.slug for t in teams], "changes": {f: [o, n] for f, (o, n) in changed.items()},
    }  # fmt: skip
    for team in teams:
        if team.pk not in leads:
            leads[team.pk] = [f"email:{email}" for email in team_lead_emails(team=team)]
    notification_enqueue(event=EVENT, payload=payload, text=text, destinations=[d for t in teams for d in leads[t.pk]])
