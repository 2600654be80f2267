from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError

from governance.costs.models import Budget, BudgetAlert, DeclaredCapacity, MonthClose, RateCard, StatementLine
from governance.costs.services import last_closed_month, month_open_check


class OpenMonthForm(forms.ModelForm):
    """Refuses a row that would reprice a closed month (its start, or the start it had before the edit)."""

    moment_field = "valid_from"

    def clean(self):
        cleaned = super().clean()
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


class ClosedRowsAreNotDeleted:
    def has_delete_permission(self, request, obj=None) -> bool:
        if obj is None:
            return False
        try:
            month_open_check(when=obj.valid_from)
        except ValidationError:
            return False
        return super().has_delete_permission(request, obj)


@admin.register(RateCard)
class RateCardAdmin(ClosedRowsAreNotDeleted, admin.ModelAdmin):
    form = RateCardForm
    list_display = ("gpu_model", "cluster", "price_per_gpu_hour", "currency", "energy_price_per_kwh", "valid_from")
    list_filter = ("gpu_model", "currency", "cluster")
    date_hierarchy = "valid_from"


@admin.register(DeclaredCapacity)
class DeclaredCapacityAdmin(ClosedRowsAreNotDeleted, admin.ModelAdmin):
    form = CapacityForm
    list_display = ("cluster", "gpu_model", "count", "valid_from")
    list_filter = ("cluster", "gpu_model")


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
    list_display = ("month", "closed_at", "closed_by")


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


@admin.register(BudgetAlert)
class BudgetAlertAdmin(ReadOnlyAdmin):
    list_display = ("budget", "threshold", "spent", "sent_at")
