"""The audit log's recorder: every save and delete of a model people change becomes one entry, whatever the door.

The door and who came through it come from `governance.lib.doors` (set where a request, command or task starts);
the entry is written by model signals connected, per model, to every model of the project except those listed in
EXEMPT (the log itself, and rows the machine writes in bulk: samples, rollups, the ledger, the outbox...). So a new
view, admin page, command or service that saves a model is on record without saying so. A write that bypasses the
ORM's save (a queryset's update(), raw SQL) records its own entry: `audit_entry_write`, or `audited_action` for an
admin action. Entries are written in the writer's transaction: a write that rolls back leaves none.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Callable, Iterable
from datetime import datetime
from functools import wraps
from typing import Any

from django.apps import apps
from django.contrib import admin
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models, transaction
from django.db.models.signals import post_delete, post_save, pre_delete, pre_save

from governance.api.models import ApiToken, AuditEntry
from governance.lib.doors import current_door

# Models whose rows are not changes people make, each with the reason. Every other model of the project is audited.
EXEMPT: dict[str, str] = {
    "api.auditentry": "the log itself",
    "api.ratecount": "request counts per client and window, counted by every request",
    "usage.jobchange": "a job's history: each row is written with its own audit entry",
    "usage.ingestbatch": "the ingest inbox (the admin's re-queue action is audited)",
    "usage.sample": "raw samples",
    "usage.jobgpuhour": "rollups",
    "usage.gpuhour": "rollups",
    "usage.clusterhour": "a rollup of the GPU-hours, kept by the pricing pass",
    "usage.nodehour": "a rollup of the GPU-hours, folded by ingest",
    "usage.nodeday": "a rollup of the GPU-hours, folded by ingest",
    "usage.pricingmark": "the pricing pass's to-do list",
    "usage.collectorstatus": "each collector's last batch, kept by the periodic check from the inbox",
    "costs.charge": "the ledger, derived from usage and terms (the terms are audited)",
    "costs.statementline": "a closed month's frozen lines (the close is audited)",
    "costs.capacityday": "derived from declared capacity and the fleet",
    "costs.ledgerday": "the ledger summed per day by the pricing pass that writes the ledger (derived)",
    "costs.jobmonth": "the ledger summed per job and month by the pricing pass that writes the ledger (derived)",
    "costs.overclaim": "GPU-hours the pricing pass found claimed beyond the GPUs that exist (derived, never billed)",
    "costs.allocatedhour": "the pricing pass's per-hour allocation of a contended cluster-day",
    "costs.pricingfailure": "a job-day the pricing pass could not price, and its retries (the retry action is audited)",
    "costs.budgetalert": "an event the budget check raises and announces",
    "costs.anomaly": "an event the anomaly detector raises and announces",
    "efficiency.jobevaluation": "when a job was last evaluated",
    "efficiency.clusteralert": "an event the cluster check raises and announces",
    "efficiency.findingevent": "a finding's own history (the state change is an entry too)",
    "notify.outboxmessage": "deliveries and their retries",
    "schedule.taskrun": "each periodic task's last run",
    "fleet.nodetopology": "a node's GPU links as its collector reports them (the latest report wins)",
    "remediation.remediation": "a policy's case against a job, opened and closed by the periodic check",
    "remediation.remediationstep": "each decision of the periodic check (each is written with its own audit entry)",
}
# The project's apps, Django's groups and django-axes' sign-in records (who was locked out, who unlocked them).
PROJECT_APPS = (
    "auth",
    "axes",
    "org",
    "fleet",
    "usage",
    "costs",
    "efficiency",
    "remediation",
    "api",
    "notify",
    "schedule",
    "dashboard",
)
# Bookkeeping that changes on every sign-in or use: not a change anyone makes.
IGNORED_FIELDS = frozenset({"last_login", "last_used_at", "updated_at"})
# Never written into the log; a change to one shows as redacted.
SECRET_FIELDS = frozenset({"password", "key_hash"})
REDACTED = "[redacted]"
# Saves that mean more than "create" or "update".
ACTION_ON_CREATE = {"costs.monthclose": AuditEntry.Action.CLOSE}
ACTION_ON_FIELD = {"efficiency.finding": ("state", AuditEntry.Action.STATE),
                   "api.apitoken": ("revoked_at", AuditEntry.Action.REVOKE)}  # fmt: skip


def audited_models() -> list[type[models.Model]]:
    """The project's models whose saves and deletes are recorded."""
    return [
        m
        for m in apps.get_models()
        if m._meta.app_label in PROJECT_APPS and m._meta.label_lower not in EXEMPT and not m._meta.proxy
    ]


def snapshot(instance: models.Model, fields: Iterable[str] | None = None) -> dict[str, object]:
    """The instance's concrete fields (a relation as its key) as JSON-ready data, secrets left out."""
    wanted = set(fields) if fields is not None else None
    chosen = [
        f for f in instance._meta.concrete_fields
        if f.name not in SECRET_FIELDS and (wanted is None or f.name in wanted or f.attname in wanted)
    ]  # fmt: skip
    # A field saved as an expression (django-axes counts with F() and Concat()) holds the expression until read back.
    computed = [f.attname for f in chosen if hasattr(f.value_from_object(instance), "resolve_expression")]
    if computed and instance.pk is not None:
        instance.refresh_from_db(fields=computed)
    data: dict[str, object] = {}
    for f in chosen:
        value = f.value_from_object(instance)
        # Binary payloads (an inbox batch's body) are recorded by size, not content.
        data[f.name] = f"<{len(value)} bytes>" if isinstance(value, bytes | memoryview) else value
    return json.loads(json.dumps(data, cls=DjangoJSONEncoder))


def changes_between(before: dict[str, object], after: dict[str, object]) -> dict[str, list[object]]:
    return {k: [before.get(k), after.get(k)] for k in sorted(set(before) | set(after)) if before.get(k) != after.get(k)}


def _address(value: str | None) -> str | None:
    try:
        return str(ipaddress.ip_address((value or "").strip()))
    except ValueError:
        return None


def door_fields() -> dict[str, Any]:
    """Who and where, from the door this change came through (a shell or script: door `other`, no actor)."""
    door = current_door()
    if door is None:
        return {"door": AuditEntry.Door.OTHER}
    fields: dict[str, Any] = {
        "door": door.kind, "where": door.where[:300], "address": _address(door.address), "actor_id": door.user_id,
        "actor_name": door.actor_name, "token_id": door.token_id, "token_name": door.token_name,
    }  # fmt: skip
    request = door.request
    if request is not None:
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated:
            fields |= {"actor_id": user.pk, "actor_name": user.get_username()}
        auth = getattr(request, "auth", None)
        if isinstance(auth, ApiToken):
            fields |= {"token_id": auth.pk, "token_name": auth.name}
    return fields


def _bounded(fields: dict[str, Any]) -> dict[str, Any]:
    return fields | {"actor_name": (fields.get("actor_name") or "")[:150],
                     "token_name": (fields.get("token_name") or "")[:200]}  # fmt: skip


def audit_entry_write(
    *, action: str, model: str, object_pk: object, object_repr: str, changes: dict[str, list[object]],
    **who: Any,
) -> AuditEntry:  # fmt: skip
    """One entry; who and where come from the current door unless given (`actor_id`, `actor_name`, `token_id`...)."""
    fields = _bounded(door_fields() | {k: v for k, v in who.items() if v is not None})
    return AuditEntry.objects.create(
        action=action, model=model, object_pk=str(object_pk)[:64], object_repr=object_repr[:200], changes=changes,
        **fields,
    )  # fmt: skip


def audit_entries_write(
    *, action: str, model: str, objects: Iterable[tuple[object, str, dict[str, list[object]]]], at: datetime,
) -> int:  # fmt: skip
    """One entry per (pk, label, changes) in one INSERT, all through the current door (a bulk write's log)."""
    fields = _bounded(door_fields())
    rows = [
        AuditEntry(action=action, model=model, object_pk=str(pk)[:64], object_repr=label[:200], changes=changes, at=at,
                   **fields)
        for pk, label, changes in objects
    ]  # fmt: skip
    return len(AuditEntry.objects.bulk_create(rows))


def _before_save(sender: type[models.Model], instance: models.Model, raw: bool = False, **kwargs: Any) -> None:
    if raw or instance._state.adding or instance.pk is None:
        instance.__dict__["_audit_before"] = None
        return
    old = sender._base_manager.filter(pk=instance.pk).first()
    instance.__dict__["_audit_before"] = (old, _secrets(old))


def _secrets(instance: models.Model | None) -> dict[str, object]:
    return {f.name: f.value_from_object(instance) for f in instance._meta.concrete_fields if f.name in SECRET_FIELDS} \
        if instance is not None else {}  # fmt: skip


def _after_save(
    sender: type[models.Model], instance: models.Model, created: bool, raw: bool = False,
    update_fields: frozenset[str] | None = None, **kwargs: Any,
) -> None:  # fmt: skip
    if raw:
        return
    saved: tuple[models.Model | None, dict[str, object]] = instance.__dict__.pop("_audit_before", None) or (None, {})
    old, old_secrets = saved
    label = sender._meta.label_lower
    before = snapshot(old, update_fields) if old is not None else {}
    changes = changes_between(before, snapshot(instance, update_fields))
    if old is not None:
        changes = {k: v for k, v in changes.items() if k not in IGNORED_FIELDS}
        changes |= {k: [REDACTED, REDACTED] for k, v in _secrets(instance).items() if old_secrets.get(k) != v}
        if not changes:
            return
    action = AuditEntry.Action.CREATE if old is None else AuditEntry.Action.UPDATE
    if old is None and label in ACTION_ON_CREATE:
        action = ACTION_ON_CREATE[label]
    elif old is not None and label in ACTION_ON_FIELD and ACTION_ON_FIELD[label][0] in changes:
        action = ACTION_ON_FIELD[label][1]
    audit_entry_write(action=action, model=label, object_pk=instance.pk, object_repr=str(instance), changes=changes)


def _before_delete(sender: type[models.Model], instance: models.Model, **kwargs: Any) -> None:
    instance.__dict__["_audit_deleted"] = (instance.pk, snapshot(instance), str(instance))


def _after_delete(sender: type[models.Model], instance: models.Model, **kwargs: Any) -> None:
    pk, before, label = instance.__dict__.pop("_audit_deleted", (instance.pk, snapshot(instance), str(instance)))
    audit_entry_write(
        action=AuditEntry.Action.DELETE, model=sender._meta.label_lower, object_pk=pk, object_repr=label,
        changes=changes_between(before, {}),
    )  # fmt: skip


def audit_signals_connect() -> None:
    """Record every save and delete of the audited models (per model: the exempt ones keep fast bulk deletes)."""
    for model in audited_models():
        uid = f"audit-{model._meta.label_lower}"
        pre_save.connect(_before_save, sender=model, dispatch_uid=f"{uid}-pre-save")
        post_save.connect(_after_save, sender=model, dispatch_uid=f"{uid}-post-save")
        pre_delete.connect(_before_delete, sender=model, dispatch_uid=f"{uid}-pre-delete")
        post_delete.connect(_after_delete, sender=model, dispatch_uid=f"{uid}-post-delete")


AdminAction = Callable[[Any, Any, Any], Any]


def audited_action(action: AdminAction) -> AdminAction:
    """An admin action on record: one entry per selected object with what the action changed on it.

    Wrap every custom admin action with it (under @admin.action); tests/api/test_audit_doors.py checks they are.
    """

    @wraps(action)
    def run(modeladmin: Any, request: Any, queryset: models.QuerySet) -> Any:
        with transaction.atomic():
            before = {obj.pk: snapshot(obj) for obj in queryset}
            result = action(modeladmin, request, queryset)
            after = {obj.pk: obj for obj in queryset.model._base_manager.filter(pk__in=list(before))}
            for pk, old in before.items():
                now = after.get(pk)
                audit_entry_write(
                    action=AuditEntry.Action.ACTION, model=queryset.model._meta.label_lower, object_pk=pk,
                    object_repr=f"{action.__name__}: {now if now is not None else pk}",
                    changes=changes_between(old, snapshot(now) if now is not None else {}),
                )  # fmt: skip
        return result

    run.audited = True  # type: ignore[attr-defined]
    return run


class MachineRecordAdmin(admin.ModelAdmin):
    """The admin page of an exempt model (rows the machine writes): read-only, so the admin changes nothing that
    the audit log does not record."""

    def has_add_permission(self, request: Any) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return False
