from django.db import models
from django.db.models import Q


class OutboxMessage(models.Model):
    """One event (a finding's state change, a budget threshold, a cluster alert) for one destination.

    Written in the transaction of the change it announces, so an event is never lost and never sent for a change
    that rolled back; the periodic delivery posts due rows, retrying with backoff until delivered or given up.
    """

    event = models.CharField(max_length=64)
    destination = models.CharField(max_length=500, help_text="An https:// URL (signed JSON) or an apprise URL.")
    payload = models.JSONField()
    text = models.TextField(blank=True, help_text="What chat and email destinations show.")
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True, help_text="Empty once delivered or given up.")
    last_error = models.TextField(blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["next_attempt_at"], condition=Q(next_attempt_at__isnull=False), name="outbox_due_idx")
        ]

    def __str__(self) -> str:
        return f"{self.event} -> {self.destination}"

    @property
    def status(self) -> str:
        if self.delivered_at:
            return "delivered"
        return "pending" if self.next_attempt_at else "given up"
