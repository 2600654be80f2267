"""Writes for chargeback: rate cards, declared capacity, policies, commitments, budgets, closing a month.
Budget alerts live in governance/costs/budget_alerts.py (re-exported here)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, time, timedelta
from decimal import Decimal, InvalidOperation

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction
from django.db.models import Sum
from django.utils import timezone
from django.utils.text import slugify

# Re-exported: callers import the budget alerts from here.
from governance.costs.budget_alerts import (  # noqa: F401
    DEFAULT_THRESHOLDS,
    AlertSent,
    budget_alerts_check,
    forecast_alert_text,
)
from governance.costs.carbon import country_intensity
from governance.costs.corrections import corrections_refresh, months_corrected_in
from governance.costs.currency import validate_currency
from governance.costs.locks import lock_months
from governance.costs.marks import terms_changed
from governance.costs.models import (
    DEFAULT_MODEL,
    BillingModeTerm,
    Budget,
    Charge,
    Commitment,
    DeclaredCapacity,
    GridIntensity,
    MonthClose,
    OwnedGpuCost,
    RateCard,
    UnallocatedPolicyTerm,
)
from governance.costs.owned import Derivation, owned_rate_derive
from governance.costs.settle import month_settle
from governance.costs.summaries import ledger_days_refresh
from governance.costs.terms import live_terms
from governance.costs.unpriced import CLOSE_REFUSED, unpriced_usage
from governance.fleet.models import Cluster
from governance.lib.months import Month
from governance.notify.targets import webhook_url_validate
from governance.org.models import Team, User

logger = logging.getLogger(__name__)

MONTH_CLOSED = (
    "{field}: {when} falls in or before the closed month {month}; a closed month never changes"
    " (date the change from {open} on)."
)
MONTH_ALREADY_CLOSED = "month {month} is already closed; a closed month never changes."
MONTH_NOT_ENDED = "month {month} has not ended yet; it can be closed from {end:%Y-%m-%d} on."
CURRENCY_MISMATCH = "currency: {currency} differs from the rate cards in force ({existing}); use one currency."
NOT_NEGATIVE = "{field}: must not be negative (got {value})."
NOT_A_NUMBER = "{field}: {value!r} is not a number."
UNKNOWN_CLUSTER = "cluster: no cluster named {name!r}."
BATCH = 5000


class MonthClosed(ValidationError):
    """The change would alter a closed month."""


def _decimal(value: object, name: str) -> Decimal:
    try:
        number = Decimal(str(value))
    except (InvalidOperation, ValueError):
        raise ValidationError(NOT_A_NUMBER.format(field=name, value=value), code="invalid") from None
    if not number.is_finite():
        raise ValidationError(NOT_A_NUMBER.format(field=name, value=value), code="invalid")
    if number < 0:
        raise ValidationError(NOT_NEGATIVE.format(field=name, value=value), code="negative")
    return number


def last_closed_month() -> Month | None:
    latest = MonthClose.objects.order_by("-month").values_list("month", flat=True).first()
    return Month(latest.year, latest.month) if latest else None


def month_open_check(*, when: datetime, field: str = "valid_from") -> None:
    """Refuse a change effective at `when` if it would reprice a closed month."""
    closed = last_closed_month()
    if closed is not None and when < closed.end:
        raise MonthClosed(
            MONTH_CLOSED.format(field=field, when=when.isoformat(), month=closed, open=closed.end.date().isoformat()),
            code="month_closed",
        )


def rate_card_set(
    *, gpu_model: str, price: Decimal | str, currency: str, valid_from: datetime, cluster: str | None = None,
    energy_price_per_kwh: Decimal | str | None = None,
) -> RateCard:  # fmt: skip
    """Create (or correct, if its start is still open) the rate of a GPU model from `valid_from` on."""
    price = _decimal(price, "price")
    energy = None if energy_price_per_kwh in (None, "") else _decimal(energy_price_per_kwh, "energy_price_per_kwh")
    validate_currency(currency)
    existing = set(
        RateCard.objects.exclude(gpu_model=gpu_model, valid_from=valid_from).values_list("currency", flat=True)
    )
    if existing and existing != {currency}:
        raise ValidationError(CURRENCY_MISMATCH.format(currency=currency, existing=", ".join(sorted(existing))))
    if not gpu_model.strip():
        raise ValidationError("gpu_model: must not be empty (use '*' for the default rate).")
    month_open_check(when=valid_from)
    cluster_obj = _cluster(cluster) if cluster else None
    with transaction.atomic():
        card, _ = RateCard.objects.update_or_create(
            gpu_model=gpu_model.strip(), cluster=cluster_obj, valid_from=valid_from,
            defaults={"price_per_gpu_hour": price, "currency": currency, "energy_price_per_kwh": energy},
        )  # fmt: skip
        # A model's first card also prices the time before it (price_interval), so it re-prices every open day.
        first = not RateCard.objects.filter(
            gpu_model=card.gpu_model, cluster=cluster_obj, valid_from__lt=valid_from
        ).exists()
        terms_changed(since=None if first else valid_from, cluster_id=cluster_obj.pk if cluster_obj else None,
                      gpu_model=None if card.gpu_model == DEFAULT_MODEL else card.gpu_model)  # fmt: skip
    return card


def _cluster(name: str) -> Cluster:
    cluster = Cluster.objects.filter(name=name).first()
    if cluster is None:
        raise ValidationError(UNKNOWN_CLUSTER.format(name=name), code="unknown")
    return cluster


def capacity_set(*, cluster: str, gpu_model: str, count: int, valid_from: datetime) -> DeclaredCapacity:
    """Declare how many GPUs of a model a cluster holds from `valid_from` on (a cluster only schedulers report)."""
    if count < 0:
        raise ValidationError(NOT_NEGATIVE.format(field="count", value=count), code="negative")
    if not gpu_model.strip():
        raise ValidationError("gpu_model: must not be empty.")
    month_open_check(when=valid_from)
    with transaction.atomic():
        cluster_obj, _ = Cluster.objects.get_or_create(name=cluster)
        capacity, _ = DeclaredCapacity.objects.update_or_create(
            cluster=cluster_obj, gpu_model=gpu_model.strip(), valid_from=valid_from, defaults={"count": count}
        )
        # Declaring any capacity switches the cluster from seen GPUs to declared ones on every open day.
        terms_changed(since=None, cluster_id=cluster_obj.pk, gpu_model=None, usage=False)
    return capacity


UNKNOWN_POLICY = "policy: {value!r} is not one of {choices}."


def policy_set(*, cluster: str, policy: str, valid_from: datetime) -> UnallocatedPolicyTerm:
    """Bill a cluster's unallocated capacity as its own line (`show`) or shared among teams (`share`) from
    `valid_from` on; a date in a closed month is refused."""
    if policy not in Cluster.UnallocatedPolicy.values:
        raise ValidationError(
            UNKNOWN_POLICY.format(value=policy, choices=", ".join(Cluster.UnallocatedPolicy.values)), code="invalid"
        )
    month_open_check(when=valid_from)
    cluster_obj = _cluster(cluster)
    with transaction.atomic():
        term, _ = UnallocatedPolicyTerm.objects.update_or_create(
            cluster=cluster_obj, valid_from=valid_from, defaults={"policy": policy}
        )
        cluster_policy_follow(cluster_id=cluster_obj.pk)
        terms_changed(since=valid_from, cluster_id=cluster_obj.pk, gpu_model=None, usage=False)
    return term


def cluster_policy_follow(*, cluster_id: int) -> None:
    """The cluster's policy field follows its latest term (the one in force from then on)."""
    current = UnallocatedPolicyTerm.objects.filter(cluster_id=cluster_id).order_by("-valid_from").first()
    if current is not None:
        Cluster.objects.filter(pk=cluster_id).update(unallocated_policy=current.policy)


UNKNOWN_MODE = "mode: {value!r} is not one of {choices}."


def billing_mode_set(*, cluster: str, mode: str, valid_from: datetime) -> BillingModeTerm:
    """Bill a cluster's charges (`billed`) or only show them (`showback`: statements carry the cost, BilledCost 0)
    from `valid_from` on; a date in a closed month is refused. The open days after it are re-priced."""
    if mode not in BillingModeTerm.Mode.values:
        raise ValidationError(
            UNKNOWN_MODE.format(value=mode, choices=", ".join(BillingModeTerm.Mode.values)), code="invalid"
        )
    month_open_check(when=valid_from)
    cluster_obj = _cluster(cluster)
    with transaction.atomic():
        term, _ = BillingModeTerm.objects.update_or_create(
            cluster=cluster_obj, valid_from=valid_from, defaults={"mode": mode}
        )
        terms_changed(since=valid_from, cluster_id=cluster_obj.pk, gpu_model=None)
        # The flag moves no money: rows already priced (days ahead of the marks included) take it at once.
        terms, closed = live_terms(), last_closed_month()
        rows = Charge.objects.filter(cluster=cluster_obj, day__gte=valid_from.date())
        if closed is not None:
            rows = rows.filter(month__gte=closed.end.date())
        for day in rows.values_list("day", flat=True).distinct():
            billed = terms.billed(cluster_obj.name, datetime.combine(day, time(), tzinfo=UTC) + timedelta(days=1))
            if rows.filter(day=day).exclude(billed=billed).update(billed=billed):
                ledger_days_refresh([(cluster_obj.pk, day)])
    return term


def grid_intensity_set(
    *, cluster: str, valid_from: datetime, location: str = "", kg_co2e_per_kwh: Decimal | str | None = None,
    source: str = "",
) -> GridIntensity:  # fmt: skip
    """The grid carbon intensity of a cluster from `valid_from` on: a given value, else the default of its
    location (an ISO 3166 alpha-3 country) from the shipped dataset (governance/costs/carbon.py)."""
    if kg_co2e_per_kwh in (None, ""):
        try:
            value, source = country_intensity(location)
        except ValueError as exc:
            raise ValidationError(str(exc), code="invalid") from None
    else:
        value = _decimal(kg_co2e_per_kwh, "kg_co2e_per_kwh")
    month_open_check(when=valid_from)
    cluster_obj = _cluster(cluster)
    with transaction.atomic():
        term, _ = GridIntensity.objects.update_or_create(
            cluster=cluster_obj, valid_from=valid_from,
            defaults={"kg_co2e_per_kwh": value, "location": location.strip().upper(), "source": source or "given"},
        )  # fmt: skip
        terms_changed(since=valid_from, cluster_id=cluster_obj.pk, gpu_model=None)
    return term


COMMITMENT_OVERLAPS = (
    "start: {team} already has a commitment for {model} on {cluster} from {start:%Y-%m-%d} to {end:%Y-%m-%d};"
    " one commitment per team, cluster and model at a time."
)
ENDS_BEFORE_START = "end: must come after start."
NOT_A_PERCENTAGE = "contracted_discount_percent: must be between 0 and 100 (got {value})."


def commitment_overlap_check(
    *, team: Team, cluster: Cluster, gpu_model: str, start: datetime, end: datetime, exclude_pk: int | None = None
) -> None:
    """One commitment per team, cluster and model at a time: refuse one whose span meets another's."""
    others = Commitment.objects.filter(team=team, cluster=cluster, gpu_model=gpu_model, start__lt=end, end__gt=start)
    clash = (others.exclude(pk=exclude_pk) if exclude_pk is not None else others).first()
    if clash is not None:
        text = COMMITMENT_OVERLAPS.format(
            team=team.name, model=clash.gpu_model, cluster=cluster.name, start=clash.start, end=clash.end
        )
        raise ValidationError(text, code="overlaps")


def commitment_set(
    *, team: Team, cluster: str, gpu_model: str, gpus: int, price: Decimal | str, start: datetime, end: datetime,
    contracted_discount_percent: Decimal | str = Decimal(0), currency: str = "USD", name: str = "",
) -> Commitment:  # fmt: skip
    """Reserve `gpus` GPUs of a model on a cluster for a team at a committed price from `start` to `end`; a start in
    a closed month is refused. The open days from `start` on are re-priced."""
    price = _decimal(price, "price")
    discount = _decimal(contracted_discount_percent, "contracted_discount_percent")
    if discount > 100:
        raise ValidationError(NOT_A_PERCENTAGE.format(value=discount), code="invalid")
    if gpus < 1:
        raise ValidationError("gpus: commit at least one GPU.", code="invalid")
    if end <= start:
        raise ValidationError(ENDS_BEFORE_START, code="invalid")
    if not gpu_model.strip():
        raise ValidationError("gpu_model: must not be empty.")
    validate_currency(currency)
    existing = set(RateCard.objects.values_list("currency", flat=True))
    if existing and existing != {currency}:
        raise ValidationError(CURRENCY_MISMATCH.format(currency=currency, existing=", ".join(sorted(existing))))
    month_open_check(when=start, field="start")
    cluster_obj = _cluster(cluster)
    with transaction.atomic():
        commitment_overlap_check(team=team, cluster=cluster_obj, gpu_model=gpu_model.strip(), start=start, end=end)
        commitment = Commitment.objects.create(
            team=team, cluster=cluster_obj, gpu_model=gpu_model.strip(), gpus=gpus, price_per_gpu_hour=price,
            contracted_discount_percent=discount, currency=currency, start=start, end=end, name=name,
        )  # fmt: skip
        terms_changed(since=start, cluster_id=cluster_obj.pk, gpu_model=commitment.gpu_model)
    return commitment


def owned_gpu_rate_derive(*, cost: OwnedGpuCost, measured_days: int = 30, now: datetime | None = None) -> Derivation:
    """The hourly rate of an owned GPU with its arithmetic: capex amortised per month, the mean kW its jobs drew
    over the last `measured_days` (from the ledger's kWh / GPU-hours) x the power price, and the overhead share."""
    now = now or timezone.now()
    since = (now - timedelta(days=measured_days)).date()
    used = Charge.objects.filter(kind="usage", cluster=cost.cluster, gpu_model=cost.gpu_model, day__gte=since)
    sums = used.aggregate(kwh=Sum("energy_kwh"), hours=Sum("gpu_hours"))
    mean_kw = (sums["kwh"] / sums["hours"]).quantize(Decimal("0.0001")) if sums["hours"] else Decimal(0)
    try:
        return owned_rate_derive(
            purchase=cost.purchase_price_per_gpu, residual=cost.residual_value_per_gpu,
            months=cost.depreciation_months, start=Month(cost.in_service_from.year, cost.in_service_from.month),
            mean_kw=mean_kw, power_price=cost.power_price_per_kwh, overhead_share=cost.overhead_share,
            currency=cost.currency,
        )  # fmt: skip
    except ValueError as exc:
        raise ValidationError(str(exc), code="invalid") from None


def owned_gpu_rates_set(*, cost: OwnedGpuCost, measured_days: int = 30, now: datetime | None = None) -> Derivation:
    """Write the derived rate as the cluster's rate card of each depreciation month still open (rate_card_set)."""
    derivation = owned_gpu_rate_derive(cost=cost, measured_days=measured_days, now=now)
    closed = last_closed_month()
    for m in derivation.months:
        if closed is None or m.month.start >= closed.end:
            rate_card_set(gpu_model=cost.gpu_model, price=m.rate, currency=cost.currency, valid_from=m.month.start,
                          cluster=cost.cluster.name)  # fmt: skip
    return derivation


def budget_set(
    *, team: Team, month: Month, amount: Decimal | str, currency: str = "USD", thresholds: list[int] | None = None,
    webhook_url: str = "",
) -> Budget:  # fmt: skip
    amount = _decimal(amount, "amount")
    validate_currency(currency)
    if thresholds is not None and any(not isinstance(t, int) or not 0 < t <= 1000 for t in thresholds):
        raise ValidationError("thresholds: use whole percentages between 1 and 1000.")
    try:
        webhook_url_validate(webhook_url)
    except ValidationError as exc:
        raise ValidationError(f"webhook_url: {'; '.join(exc.messages)}", code=exc.code) from None
    month_open_check(when=month.start, field="month")
    budget, _ = Budget.objects.update_or_create(
        team=team, month=month.start.date(),
        defaults={"amount": amount, "currency": currency, "thresholds": thresholds or [], "webhook_url": webhook_url},
    )  # fmt: skip
    return budget


FREEZE = """
INSERT INTO costs_statementline (close_id, kind, period_start, period_end, corrects, cluster_name, team_id,
    team_name, project_name, job_ref, user_name, gpu_model, mig_profile, gpu_hours, used_gpu_hours, idle_gpu_hours,
    cost, idle_cost, energy_kwh, energy_cost, carbon_kg, billed, currency, at_default_rate, job_id, project_id,
    corrected_kind, reason, list_cost, contracted_cost, billed_cost, commitment_gpu_hours, commitment_id, gpu_share)
SELECT %s, kind, period_start, period_end, corrects, cluster_name, team_id, team_name, project_name, job_ref,
    user_name, gpu_model, mig_profile, gpu_hours, used_gpu_hours, idle_gpu_hours, cost, idle_cost, energy_kwh,
    energy_cost, carbon_kg, billed, currency, at_default_rate, job_id, project_id, corrected_kind, reason,
    list_cost, contracted_cost, billed_cost, commitment_gpu_hours, commitment_id, gpu_share
FROM costs_charge WHERE month = %s ORDER BY kind, period_start, id
"""


def invoice_id_for(month: Month) -> str:
    """The invoice a month's close issues to the billing account (FOCUS InvoiceId): one per month and account."""
    return f"GG-{month}-{slugify(settings.GOVERNANCE_BILLING_ACCOUNT)[:60]}"


def statement_close(
    *, month: Month, user: User | None = None, now: datetime | None = None, accept_unpriced: bool = False
) -> MonthClose:
    """Freeze a month: price what it has left (governance/costs/settle.py: its pending marks and the days priced
    short of their end; in full only if it does not add up), bring the corrections landing in it up to date, keep
    its terms, and copy its ledger rows as the frozen statement. From then on it is read, never computed. The
    findings of the jobs priced here are evaluated after the close commits (a task), never inside it.

    Usage no rate card prices refuses the close (code `unpriced`, naming cluster, model and GPU-hours) unless
    `accept_unpriced`: then what was accepted is kept on the close, and so in the close's audit entry."""
    now = now or timezone.now()
    if month.end > now:
        raise ValidationError(MONTH_NOT_ENDED.format(month=month, end=month.end), code="not_ended")
    try:
        with transaction.atomic():
            lock_months([month], shared=False)  # waits for the passes pricing the month right now
            if MonthClose.objects.filter(month=month.start.date()).exists():
                raise IntegrityError("closed already")
            month_settle(month=month, now=now)
            for corrected in months_corrected_in(month):
                corrections_refresh(corrected=corrected, now=now)
            unpriced = unpriced_usage(month=month)
            if unpriced and not accept_unpriced:
                found = "; ".join(str(u) for u in unpriced)
                raise ValidationError(CLOSE_REFUSED.format(month=month, found=found), code="unpriced")
            close = MonthClose.objects.create(
                month=month.start.date(), closed_by=user, terms=live_terms().snapshot(),
                unpriced_accepted=[u.as_record() for u in unpriced], invoice_id=invoice_id_for(month),
            )  # fmt: skip
            with connection.cursor() as cursor:
                cursor.execute(FREEZE, [close.pk, month.start.date()])
    except IntegrityError:
        raise ValidationError(MONTH_ALREADY_CLOSED.format(month=month), code="month_closed") from None
    return close
