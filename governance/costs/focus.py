"""Chargeback as FinOps FOCUS 1.2 rows: the 21 mandatory columns, a few optional ones and x_ extensions.

Rows are yielded one by one from a streamed iterator of charges, so memory stays flat whatever the count.
Amounts keep six decimals (summing rows then rounds to the cent the same way the statement does).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from decimal import Decimal
from functools import lru_cache

from django.conf import settings

from governance.costs.ledger import UNALLOCATED, UNATTRIBUTED, Charge
from governance.lib.months import Month

MANDATORY = [
    "BilledCost", "BillingAccountId", "BillingAccountName", "BillingCurrency", "BillingPeriodStart",
    "BillingPeriodEnd", "ChargeCategory", "ChargeClass", "ChargeDescription", "ChargePeriodStart", "ChargePeriodEnd",
    "ContractedCost", "EffectiveCost", "InvoiceIssuerName", "ListCost", "PricingQuantity", "PricingUnit",
    "ProviderName", "PublisherName", "ServiceCategory", "ServiceName",
]  # fmt: skip
OPTIONAL = [
    "ConsumedQuantity", "ConsumedUnit", "SubAccountId", "SubAccountName", "ResourceId", "ResourceName", "SkuId",
    "Tags",
]  # fmt: skip
EXTENSIONS = [
    "x_IdleCost", "x_UsedGpuHours", "x_IdleGpuHours", "x_GpuModel", "x_MigProfile", "x_EnergyKwh", "x_EnergyCost",
    "x_AtDefaultRate", "x_CorrectsMonth", "x_ChargeKind",
]  # fmt: skip
HEADER = MANDATORY + OPTIONAL + EXTENSIONS

# FOCUS 1.2 allowed values (ChargeClass is null except for corrections).
CHARGE_CATEGORIES = {"Usage", "Purchase", "Tax", "Credit", "Adjustment"}
SERVICE_CATEGORY = "Compute"
UNIT = "GPU-Hours"
ROWS_PER_CHUNK = 256


class _Echo:
    def write(self, value: str) -> str:
        return value


@lru_cache(maxsize=4096)
def focus_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _amount(value: Decimal) -> str:
    return f"{value:.6f}"


@lru_cache(maxsize=4096)
def _tags(cluster: str, project: str, user: str) -> str:
    return json.dumps({"cluster": cluster, "project": project, "user": user}, sort_keys=True)


def _description(c: Charge) -> str:
    if c.kind == "unallocated":
        return f"Unallocated capacity of {c.cluster} ({c.gpu_model})"
    if c.kind == "shared":
        return f"Share of the unallocated capacity of {c.cluster}"
    what = f"job {c.job_ref} on {c.cluster}" if c.job_ref else f"{c.team} on {c.cluster}"
    if c.kind == "adjustment":
        return f"Correction of {c.corrects}: late usage of {what}"
    default = " (cluster default rate)" if c.at_default_rate else ""
    return f"GPU-hours of {what}{default}"


def focus_row(c: Charge, month: Month, account: tuple[str, str], provider: str) -> list[str]:
    cost = _amount(c.cost)
    team_known = c.team not in (UNALLOCATED, UNATTRIBUTED) and c.team_id is not None
    sku = f"{c.gpu_model} MIG {c.mig_profile}" if c.mig_profile else c.gpu_model
    resource = (
        f"{c.cluster}/{c.job_ref}" if c.job_ref else (f"{c.cluster}/unallocated/{c.gpu_model}" if c.gpu_model else "")
    )
    tags = _tags(c.cluster, c.project, c.user)
    hours = _amount(c.gpu_hours)
    return [
        cost, account[0], account[1], c.currency, focus_time(month.start), focus_time(month.end),
        "Adjustment" if c.kind == "adjustment" else "Usage", "Correction" if c.kind == "adjustment" else "",
        _description(c), focus_time(c.period_start), focus_time(c.period_end), cost, cost, provider, cost, hours,
        UNIT, provider, provider, SERVICE_CATEGORY, "GPU compute",
        hours, UNIT, f"team-{c.team_id}" if team_known else "", c.team, resource, c.job_ref, sku, tags,
        _amount(c.idle_cost), _amount(c.used_gpu_hours), _amount(c.idle_gpu_hours), c.gpu_model, c.mig_profile,
        _amount(c.energy_kwh), _amount(c.energy_cost), "true" if c.at_default_rate else "false",
        str(c.corrects) if c.corrects else "", c.kind,
    ]  # fmt: skip


def focus_csv(charges: Iterable[Charge], *, month: Month) -> Iterator[str]:
    """The CSV text in chunks of rows, header first."""
    writer = csv.writer(_Echo(), lineterminator="\n")
    account = (settings.GOVERNANCE_BILLING_ACCOUNT, settings.GOVERNANCE_BILLING_ACCOUNT)
    provider = settings.GOVERNANCE_PROVIDER_NAME
    yield writer.writerow(HEADER)
    chunk: list[str] = []
    for charge in charges:
        chunk.append(writer.writerow(focus_row(charge, month, account, provider)))
        if len(chunk) >= ROWS_PER_CHUNK:
            yield "".join(chunk)
            chunk = []
    if chunk:
        yield "".join(chunk)
