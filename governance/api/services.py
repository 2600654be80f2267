import json
from collections.abc import Iterable

from django.core.serializers.json import DjangoJSONEncoder
from django.db import models, transaction
from django.forms.models import model_to_dict

from collectors.records import CLUSTER_NAME, CLUSTER_NAME_RULE
from governance.api.models import ApiToken, AuditEntry, hash_token
from governance.org.models import User

ADMIN_SCOPE_FOR_ADMINS = "Only platform admins may hold an admin-scoped token."
NAME_TAKEN = "You already have a token with this name."


def api_token_create(*, user: User, name: str, scope: str, clusters: Iterable[str] = ()) -> tuple[ApiToken, str]:
    """Create a token, bound to the `clusters` it may report usage for; the raw value is returned once and
    never stored."""
    if scope not in ApiToken.Scope.values:
        raise ValueError(f"scope {scope!r} is not one of {', '.join(ApiToken.Scope.values)}")
    clusters = sorted(set(clusters))
    if bad := [c for c in clusters if not CLUSTER_NAME.fullmatch(c)]:
        raise ValueError(f"{bad[0]!r}: cluster names {CLUSTER_NAME_RULE}")
    raw = ApiToken.generate()
    token = ApiToken.objects.create(
        user=user, name=name, scope=scope, prefix=raw[:10], key_hash=hash_token(raw), clusters=clusters
    )
    return token, raw


def api_token_revoke(*, token: ApiToken, actor: User, via: ApiToken | None = None) -> ApiToken:
    """Revoke once; revoking a revoked token changes nothing and records nothing."""
    if token.revoked_at is None:
        token.revoke()
        audit_entry_record(actor=actor, token=via, action=AuditEntry.Action.REVOKE, instance=token)
    return token


def snapshot(instance: models.Model) -> dict[str, object]:
    """The instance's field values as JSON-ready data, to diff before and after a write."""
    return json.loads(json.dumps(model_to_dict(instance), cls=DjangoJSONEncoder))


def changes_between(before: dict[str, object], after: dict[str, object]) -> dict[str, list[object]]:
    return {k: [before.get(k), after.get(k)] for k in sorted(set(before) | set(after)) if before.get(k) != after.get(k)}


def audit_entry_record(
    *,
    actor: User | None,
    token: ApiToken | None,
    action: str,
    instance: models.Model,
    changes: dict[str, list[object]] | None = None,
    object_pk: object = None,
) -> AuditEntry:
    """Record one write; runs inside the writer's transaction so a rolled-back write leaves no entry."""
    pk = instance.pk if object_pk is None else object_pk
    return AuditEntry.objects.create(
        actor=actor if actor is not None and actor.is_authenticated else None,
        actor_name=getattr(actor, "username", "") or "",
        token=token,
        action=action,
        model=instance._meta.label_lower,
        object_pk=str(pk),
        object_repr=str(instance)[:200],
        changes=changes or {},
    )


@transaction.atomic
def audited_save(*, save, actor: User, token: ApiToken | None, instance: models.Model | None) -> models.Model:
    """Run `save()` (a serializer's) and record what it changed, in one transaction."""
    before = snapshot(instance) if instance is not None else {}
    saved = save()
    action = AuditEntry.Action.UPDATE if instance is not None else AuditEntry.Action.CREATE
    audit_entry_record(
        actor=actor, token=token, action=action, instance=saved, changes=changes_between(before, snapshot(saved))
    )
    return saved


@transaction.atomic
def audited_delete(*, actor: User, token: ApiToken | None, instance: models.Model) -> None:
    pk, before = instance.pk, snapshot(instance)
    instance.delete()
    audit_entry_record(
        actor=actor,
        token=token,
        action=AuditEntry.Action.DELETE,
        instance=instance,
        object_pk=pk,
        changes=changes_between(before, {}),
    )


def audit_request_write(*, request, action: str, instance: models.Model) -> AuditEntry:
    """Record a write that an API view made through a domain service (who, with which token, what)."""
    token = request.auth if isinstance(request.auth, ApiToken) else None
    return audit_entry_record(actor=request.user, token=token, action=action, instance=instance)
