from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError

from governance.api.audit import audited_action
from governance.costs.failures import pricing_failures_mark
from governance.costs.marks import terms_changed
from governance.costs.models import (
    DEFAULT_MODEL,
    Budget,
    BudgetAlert,
    BudgetRequest,
    CapacityDay,
    Charge,
    Commitment,
    DeclaredCapacity,
    MonthClose,
    OverClaim,
    PricingFailure,
    RateCard,
    StatementLine,
    UnallocatedPolicyTerm,
)
from governance.costs.services import (
    cluster_policy_follow,
    commitment_overlap_check,
    last_closed_month,
    month_open_check,
)


class OpenMonthForm(forms.ModelForm):
    """Refuses a row that would reprice a closed month (its start, or the start it had before the edit)."""

    moment_field = "valid_from"

    def clean(self):
        super().clean()
        cleaned = self.cleaned_data
        moments = [cleaned.get(self.moment_field)]
        if self.instance.pk:
            moments.append(getattr(self.instance, self.moment_field))
        for moment in filter(None, moments):
            try:
                month_open_check(when=moment, field=self.moment_field)
            except ValidationError as exc:
                raise ValidationError({self.moment_field: exc.messages}) from None
        return cleaned


class RateCardForm(OpenMonthForm):
    class Meta:
        model = RateCard
        fields = ["gpu_model", "cluster", "price_per_gpu_hour", "currency", "energy_price_per_kwh", "valid_from"]


class CapacityForm(OpenMonthForm):
    class Meta:
        model = DeclaredCapacity
        fields = ["cluster", "gpu_model", "count", "valid_from"]


class PolicyForm(OpenMonthForm):
    class Meta:
        model = UnallocatedPolicyTerm
        fields = ["cluster", "policy", "valid_from"]


class CommitmentForm(OpenMonthForm):
    moment_field = "start"

    class Meta:
        model = Commitment
        fields = ["name", "team", "cluster", "gpu_model", "gpus", "price_per_gpu_hour", "contracted_discount_percent",
                  "currency", "start", "end"]  # fmt: skip

    def clean(self):
        cleaned = super().clean()
        start, end, team, cluster = (cleaned.get(k) for k in ("start", "end", "team", "cluster"))
        if start and end and team and cluster:
            try:
                commitment_overlap_check(team=team, cluster=cluster, gpu_model=cleaned.get("gpu_model", ""),
                                         start=start, end=end, exclude_pk=self.instance.pk)  # fmt: skip
            except ValidationError as exc:
                self.add_error("start", exc)
        return cleaned


class TermAdmin(admin.ModelAdmin):
    """A term saved or deleted here re-prices the open days it touches, as the services do; one dated into a closed
    month is not deleted."""

    def changed(self, obj) -> None:
        model = getattr(obj, "gpu_model", None)
        model = None if model in (None, DEFAULT_MODEL) else model
        usage = isinstance(obj, RateCard | Commitment)
        terms_changed(since=None, cluster_id=obj.cluster_id, gpu_model=model, usage=usage)

    def save_model(self, request, obj, form, change) -> None:
        super().save_model(request, obj, form, change)
        if isinstance(obj, UnallocatedPolicyTerm):
            cluster_policy_follow(cluster_id=obj.cluster_id)
        self.changed(obj)

    def delete_model(self, request, obj) -> None:
        super().delete_model(request, obj)
        self.changed(obj)

    def has_delete_permission(self, request, obj=None) -> bool:
        if obj is None:
            return False
        try:
            month_open_check(when=getattr(obj, "valid_from", None) or obj.start)
        except ValidationError:
            return False
        return super().has_delete_permission(request, obj)


@admin.register(RateCard)
class RateCardAdmin(TermAdmin):
    form = RateCardForm
    list_display = ("gpu_model", "cluster", "price_per_gpu_hour", "currency", "energy_price_per_kwh", "valid_from")
    list_filter = ("gpu_model", "currency", "cluster")
    date_hierarchy = "valid_from"


@admin.register(DeclaredCapacity)
class DeclaredCapacityAdmin(TermAdmin):
    form = CapacityForm
    list_display = ("cluster", "gpu_model", "count", "valid_from")
    list_filter = ("cluster", "gpu_model")


@admin.register(UnallocatedPolicyTerm)
class PolicyTermAdmin(TermAdmin):
    form = PolicyForm
    list_display = ("cluster", "policy", "valid_from", "created_at")
    list_filter = ("cluster", "policy")


@admin.register(Commitment)
class CommitmentAdmin(TermAdmin):
    form = CommitmentForm
    list_display = ("team", "cluster", "gpu_model", "gpus", "price_per_gpu_hour", "start", "end")
    list_filter = ("team", "cluster", "gpu_model")


class ReadOnlyAdmin(admin.ModelAdmin):
    """A closed month never changes: its rows are shown, never added, edited or deleted here."""

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(MonthClose)
class MonthCloseAdmin(ReadOnlyAdmin):
    list_display = ("month", "invoice_id", "closed_at", "closed_by", "unpriced_accepted")


@admin.register(PricingFailure)
class PricingFailureAdmin(ReadOnlyAdmin):
    """Job-days the pricing pass could not price; the periodic pass retries them, or "Retry now" after a fix."""

    list_display = ("cluster", "job", "day", "error", "attempts", "first_seen_at", "last_seen_at")
    list_filter = ("cluster",)
    search_fields = ("job__external_id", "error")
    actions = ["retry"]

    @admin.action(description="Retry now (re-price these job-days)")
    @audited_action
    def retry(self, request, queryset) -> None:
        marked = pricing_failures_mark(pks=queryset.values_list("pk", flat=True))
        self.message_user(request, f"{marked} job-days marked for re-pricing.")


@admin.register(StatementLine)
class StatementLineAdmin(ReadOnlyAdmin):
    list_display = ("close", "kind", "team_name", "project_name", "job_ref", "gpu_model", "period_start", "cost")
    list_filter = ("close", "kind", "cluster_name")
    search_fields = ("job_ref", "team_name", "project_name")


class BudgetForm(forms.ModelForm):
    webhook_url = forms.URLField(required=False, assume_scheme="https")

    class Meta:
        model = Budget
        fields = ["team", "month", "amount", "currency", "thresholds", "webhook_url"]

    def clean_month(self):
        month = self.cleaned_data["month"].replace(day=1)
        closed = last_closed_month()
        if closed is not None and month <= closed.start.date():
            raise ValidationError(f"{month:%Y-%m} is closed; a closed month never changes.")
        return month


@admin.register(Budget)
class BudgetAdmin(admin.ModelAdmin):
    form = BudgetForm
    list_display = ("team", "month", "amount", "currency", "thresholds")
    list_filter = ("team",)


@admin.register(BudgetRequest)
class BudgetRequestAdmin(ReadOnlyAdmin):
    """Made by a lead from the team page; finance answers by setting the budget."""

    list_display = ("team", "month", "requested_by_name", "requested_at")
    list_filter = ("month",)


@admin.register(BudgetAlert)
class BudgetAlertAdmin(ReadOnlyAdmin):
    list_display = ("budget", "threshold", "spent", "sent_at")


@admin.register(Charge)
class ChargeAdmin(ReadOnlyAdmin):
    """The ledger is written by the pricing worker only."""

    list_display = ("month", "day", "kind", "cluster_name", "team_name", "job_ref", "gpu_model", "gpu_hours", "cost")
    list_filter = ("month", "kind", "cluster_name")
    search_fields = ("job_ref", "team_name", "project_name")


@admin.register(CapacityDay)
class CapacityDayAdmin(ReadOnlyAdmin):
    list_display = ("cluster", "day", "gpu_model", "gpu_hours", "cost", "priced_until")
    list_filter = ("cluster",)


@admin.register(OverClaim)
class OverClaimAdmin(ReadOnlyAdmin):
    """GPU-hours claimed beyond the GPUs a cluster has, per day, model and ingest token: never billed."""

    list_display = ("day", "cluster", "gpu_model", "token_name", "claimed_gpu_hours", "billed_gpu_hours",
                    "overclaimed_gpu_hours", "job_refs")  # fmt: skip
    list_filter = ("cluster", "gpu_model", "token_name")
    date_hierarchy = "day"

    def has_view_permission(self, request, obj=None) -> bool:
        return bool(request.user.is_active and request.user.is_platform_admin)

    def has_module_permission(self, request) -> bool:
        return bool(request.user.is_active and request.user.is_platform_admin)

    @admin.display(description="jobs")
    def job_refs(self, obj: OverClaim) -> str:
        return ", ".join(j["job"] for j in obj.jobs[:10]) + (" ..." if len(obj.jobs) > 10 else "")
