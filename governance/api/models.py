import hashlib
import secrets
from datetime import datetime

from django.conf import settings
from django.db import models
from django.utils import timezone

from governance.api.token_cache import token_forget

TOKEN_PREFIX = "ggt_"


def hash_token(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


class ApiTokenQuerySet(models.QuerySet["ApiToken"]):
    def active(self, now: datetime | None = None) -> "ApiTokenQuerySet":
        """Tokens that still authenticate: not revoked and not past their expiry."""
        return self.filter(revoked_at__isnull=True, expires_at__gt=now or timezone.now())


class ApiToken(models.Model):
    """A named, scoped credential for automation or a collector; only its hash is stored."""

    class Scope(models.TextChoices):
        INGEST = "ingest", "Ingest only"
        READ = "read", "Read"
        WRITE = "write", "Read and write"
        ADMIN = "admin", "Admin"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=200)
    scope = models.CharField(max_length=8, choices=Scope.choices)
    prefix = models.CharField(max_length=12, help_text="The first characters, to recognise a token.")
    key_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(help_text="After this the token authenticates as invalid.")
    revoked_at = models.DateTimeField(null=True, blank=True)
    clusters = models.JSONField(
        default=list,
        blank=True,
        help_text="Cluster names this token may report usage for. Empty: none (an admin's admin-scoped token: any).",
    )

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        verbose_name = "API token"
        verbose_name_plural = "API tokens"
        ordering = ["-created_at"]
        constraints = [models.UniqueConstraint(fields=["user", "name"], name="apitoken_unique_user_name")]

    def __str__(self) -> str:
        return f"{self.name} ({self.scope}, {self.prefix}…)"

    @staticmethod
    def generate() -> str:
        return TOKEN_PREFIX + secrets.token_urlsafe(32)

    def ingest_clusters(self) -> frozenset[str] | None:
        """The clusters this token may report; None when it may report any (a platform admin's admin token)."""
        if self.scope == self.Scope.ADMIN and self.user.is_platform_admin:
            return None
        return frozenset(self.clusters)

    def revoke(self) -> None:
        self.revoked_at = timezone.now()
        self.save(update_fields=["revoked_at"])
        token_forget(self.key_hash)


class AuditEntry(models.Model):
    """One change, whatever door it came through: who made it (a user, a token, a command, a task), when, from
    where, to what, and its fields before and after. Append-only: no door edits or deletes a row, and on
    PostgreSQL a trigger refuses UPDATE and DELETE (but for clearing the link to a deleted user or token)."""

    class Door(models.TextChoices):
        PAGE = "page"
        ADMIN = "admin"
        API = "api", "API"
        COMMAND = "command"
        INGEST = "ingest"
        TASK = "task"
        OTHER = "other", "Other (a shell, a script)"

    class Action(models.TextChoices):
        CREATE = "create"
        UPDATE = "update"
        DELETE = "delete"
        REVOKE = "revoke"
        CLOSE = "close"
        STATE = "state", "State change"
        ACTION = "action", "Admin action"

    at = models.DateTimeField(default=timezone.now)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    actor_name = models.CharField(max_length=150, help_text="Kept when the user is deleted.")
    token = models.ForeignKey(ApiToken, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    action = models.CharField(max_length=16, choices=Action.choices)
    model = models.CharField(max_length=100, help_text="app_label.model of the object written.")
    object_pk = models.CharField(max_length=64)
    object_repr = models.CharField(max_length=200)
    changes = models.JSONField(default=dict, blank=True, help_text="field: [before, after]")
    door = models.CharField(max_length=8, choices=Door.choices, default=Door.OTHER)
    where = models.CharField(max_length=300, blank=True, help_text="The path, command or task it came through.")
    address = models.GenericIPAddressField(null=True, blank=True, help_text="The client's address (web doors).")
    token_name = models.CharField(max_length=200, blank=True, help_text="Kept when the token is deleted.")

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [
            models.Index(fields=["model", "object_pk"], name="auditentry_object_idx"),
            models.Index(fields=["actor_name", "at"], name="auditentry_actor_idx"),
            models.Index(fields=["at"], name="auditentry_at_idx"),
        ]
        verbose_name_plural = "audit entries"

    def __str__(self) -> str:
        return f"{self.actor_name} {self.action} {self.model} {self.object_pk} at {self.at:%Y-%m-%d %H:%M:%S}"

    def save(self, *args: object, **kwargs: object) -> None:
        if not self._state.adding:
            raise ValueError("An audit entry is never changed.")
        super().save(*args, **kwargs)  # type: ignore[arg-type]

    def delete(self, *args: object, **kwargs: object) -> tuple[int, dict[str, int]]:
        raise ValueError("An audit entry is never deleted.")


class RateCount(models.Model):
    """How many requests (or invalid tokens) one client sent in its current window: a row per counter, counted by
    one atomic statement per request (governance/api/counters.py) when the shared cache is the database's."""

    key = models.CharField(max_length=200, primary_key=True, help_text="The counter: its scope and its client.")
    window_end = models.BigIntegerField(help_text="When the window counted ends, in seconds since the epoch.")
    count = models.BigIntegerField()

    def __str__(self) -> str:
        return f"{self.key}: {self.count} until {self.window_end}"


class WriteMark(models.Model):
    """Where the primary's WAL stood after a signed-in user's last write (a browser's or a token's), while the
    replica may not have replayed it: that user's reads go to the primary until it has (governance/lib/replica.py).
    One row a user, only ever moved forward, by one upsert, so that of two writes in flight at once the later
    position stays."""

    # No foreign key in the database: a mark written after a request that deleted its own user must not fail it.
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, primary_key=True, related_name="+", db_constraint=False
    )
    lsn = models.BigIntegerField(help_text="The primary's WAL position after the write, in bytes (pg_lsn - '0/0').")
    until = models.DateTimeField(help_text="Past this the user reads whatever the replica has.")

    class Meta:
        db_table = "gg_write_mark"

    def __str__(self) -> str:
        return f"user {self.user_id} wrote up to {self.lsn} (until {self.until:%Y-%m-%d %H:%M:%S})"
