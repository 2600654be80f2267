"""Chargeback as FinOps FOCUS 1.2 rows: the 21 mandatory columns, a few optional ones and x_ extensions.

The FinOps Foundation's validator passes it (tests/costs/test_focus_validator.py). A closed month's rows carry the
invoice its close issued (InvoiceId), an open month's none. A team is a sub account; rows of no team (unallocated
capacity, usage no project maps) have neither SubAccountId nor SubAccountName. ConsumedQuantity is what a row's
GPUs were held for, so it is null where nothing was consumed: corrections, purchases and unused commitments. A
job on a share of one GPU consumed GPU-hours of its share (hours x 0.25 for one replica of a GPU sliced in four),
the share itself in x_GpuShare (empty on whole GPUs and every row that is not a job's usage).
SkuPriceId names the price of a SKU (GPU model or MIG slice) on a cluster, or a commitment's price on its purchase
and unused rows; SkuPriceDetails spells those out as x_ properties.

On PostgreSQL the CSV is the ledger's rows formatted in SQL and streamed by `COPY (SELECT ...) TO STDOUT`: no
Python per row, memory flat whatever the count. Elsewhere the same columns are formatted here, row by row.
Amounts keep six decimals. A text cell a spreadsheet would run as a formula (= + - @, tab, CR first) gets a
leading apostrophe; amounts are numbers and stay as they are.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Decimal

from django.conf import settings
from django.db.backends.base.base import BaseDatabaseWrapper

from governance.costs.ledger import UNALLOCATED, UNATTRIBUTED
from governance.costs.models import Charge, Commitment
from governance.costs.selectors import Line, month_closed, statement_charges
from governance.lib.months import Month
from governance.lib.replica import reading_connection

MANDATORY = [
    "BilledCost", "BillingAccountId", "BillingAccountName", "BillingCurrency", "BillingPeriodStart",
    "BillingPeriodEnd", "ChargeCategory", "ChargeClass", "ChargeDescription", "ChargePeriodStart", "ChargePeriodEnd",
    "ContractedCost", "EffectiveCost", "InvoiceIssuerName", "ListCost", "PricingQuantity", "PricingUnit",
    "ProviderName", "PublisherName", "ServiceCategory", "ServiceName",
]  # fmt: skip
OPTIONAL = [
    "ConsumedQuantity", "ConsumedUnit", "SubAccountId", "SubAccountName", "ResourceId", "ResourceName", "SkuId",
    "Tags", "ChargeFrequency", "ListUnitPrice", "ContractedUnitPrice", "CommitmentDiscountId",
    "CommitmentDiscountName", "CommitmentDiscountType", "CommitmentDiscountCategory", "CommitmentDiscountStatus",
    "CommitmentDiscountQuantity", "CommitmentDiscountUnit", "InvoiceId", "ServiceSubcategory", "SkuPriceId",
    "SkuMeter", "SkuPriceDetails",
]  # fmt: skip
EXTENSIONS = [
    "x_IdleCost", "x_UsedGpuHours", "x_IdleGpuHours", "x_GpuModel", "x_MigProfile", "x_EnergyKwh", "x_EnergyCost",
    "x_AtDefaultRate", "x_CorrectsMonth", "x_ChargeKind", "x_CarbonKgCo2e", "x_BillingMode", "x_GpuShare",
]  # fmt: skip
HEADER = MANDATORY + OPTIONAL + EXTENSIONS

CHARGE_CATEGORIES = {"Usage", "Purchase", "Tax", "Credit", "Adjustment"}
SERVICE_CATEGORY = "Compute"
SERVICE_NAME = "GPU compute"
SERVICE_SUBCATEGORY = "Other (Compute)"  # batch jobs and pods on owned GPUs: no VM, container or serverless offer
SKU_METER = "GPU allocation"  # a held GPU is charged, used or not
NOT_CONSUMED = ("adjustment", "purchase", "unused")
COMMITMENT_PRICED = ("purchase", "unused")
UNIT = "GPU-Hours"
ROWS_PER_CHUNK = 256
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
SIX = Decimal("0.000001")
COMMITMENT_TYPE = "Reservation"
COMMITMENT_CATEGORY = "Usage"


def cell(text: str) -> str:
    """A text cell no spreadsheet runs as a formula."""
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def focus_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _amount(value: Decimal) -> str:
    return f"{value.quantize(SIX, rounding=ROUND_HALF_UP):.6f}"


def _description(c: Line) -> str:
    if c.kind == "unallocated":
        return f"Unallocated capacity of {c.cluster} ({c.gpu_model})"
    if c.kind == "shared":
        return f"Share of the unallocated capacity of {c.cluster}"
    if c.kind == "purchase":
        return f"Commitment of {c.team} on {c.cluster} ({c.gpu_model})"
    if c.kind == "unused":
        return f"Unused commitment of {c.team} on {c.cluster} ({c.gpu_model})"
    if c.kind == "adjustment":
        what = f" of job {c.job_ref} on {c.cluster}" if c.job_ref else f" ({c.cluster}, {c.gpu_model})"
        return f"C{c.reason[1:]}{what}"
    what = f"job {c.job_ref} on {c.cluster}" if c.job_ref else f"{c.team} on {c.cluster}"
    return f"GPU-hours of {what}{' (cluster default rate)' if c.at_default_rate else ''}"


def _unit_price(amount: Decimal, quantity: Decimal) -> str:
    return _amount(amount / quantity) if quantity else ""


def _commitment(c: Line, names: dict[int, str]) -> list[str]:
    """The CommitmentDiscount columns: set on the rows a commitment covers, its unused rows and its purchases."""
    status = "Unused" if c.kind == "unused" else "Used" if c.kind == "usage" and c.commitment_gpu_hours else ""
    if c.commitment_id is None or (c.kind == "usage" and not status):
        return ["", "", "", "", "", "", ""]
    return [f"commitment-{c.commitment_id}", cell(names.get(c.commitment_id, "")), COMMITMENT_TYPE,
            COMMITMENT_CATEGORY, status, _amount(c.commitment_gpu_hours), UNIT]  # fmt: skip


def _sku_price(c: Line, sku: str) -> tuple[str, str]:
    """SkuPriceId and SkuPriceDetails: the SKU's price on the cluster, or the commitment's where it priced the row."""
    if not sku:
        return "", ""
    commitment = f"commitment-{c.commitment_id}" if c.kind in COMMITMENT_PRICED and c.commitment_id else ""
    details = {"x_Cluster": c.cluster, "x_GpuModel": c.gpu_model}
    details |= {"x_MigProfile": c.mig_profile} if c.mig_profile else {}
    details |= {"x_CommitmentDiscountId": commitment} if commitment else {}
    text = json.dumps(details, ensure_ascii=False)
    return f"{c.cluster}/{sku}" + (f"/{commitment}" if commitment else ""), text


def focus_row(
    c: Line, month: Month, account: str, provider: str, names: dict[int, str] | None = None, invoice: str = ""
) -> list[str]:
    cost, hours = _amount(c.cost), _amount(c.gpu_hours)
    quantity = c.commitment_gpu_hours if c.kind == "purchase" else c.gpu_hours
    team_known = c.team not in (UNALLOCATED, UNATTRIBUTED) and c.team_id is not None
    consumed = c.kind not in NOT_CONSUMED
    sku = f"{c.gpu_model} MIG {c.mig_profile}" if c.mig_profile else c.gpu_model
    sku_price, sku_price_details = _sku_price(c, sku)
    if c.job_ref:
        resource = f"{c.cluster}/{c.job_ref}"
    else:
        resource = f"{c.cluster}/unallocated/{c.gpu_model}" if c.gpu_model else ""
    tags = json.dumps({"user": c.user, "cluster": c.cluster, "project": c.project}, ensure_ascii=False)
    category = {"adjustment": "Adjustment", "purchase": "Purchase"}.get(c.kind, "Usage")
    frequency = {"adjustment": "One-Time", "purchase": "Recurring"}.get(c.kind, "Usage-Based")
    # showback: EffectiveCost is the cost, nothing is billed
    billed = _amount(c.billed_cost) if c.billed else _amount(Decimal(0))
    return [
        billed, cell(account), cell(account), c.currency, focus_time(month.start), focus_time(month.end),
        category, "Correction" if c.kind == "adjustment" else "", cell(_description(c)),
        focus_time(c.period_start), focus_time(c.period_end), _amount(c.contracted_cost), cost, cell(provider),
        _amount(c.list_cost), _amount(quantity), UNIT, cell(provider), cell(provider), SERVICE_CATEGORY, SERVICE_NAME,
        hours if consumed else "", UNIT if consumed else "", f"team-{c.team_id}" if team_known else "",
        cell(c.team) if team_known else "", cell(resource), cell(c.job_ref), cell(sku), cell(tags), frequency,
        _unit_price(c.list_cost, quantity), _unit_price(c.contracted_cost, quantity), *_commitment(c, names or {}),
        cell(invoice), SERVICE_SUBCATEGORY, cell(sku_price), SKU_METER if sku else "", cell(sku_price_details),
        _amount(c.idle_cost), _amount(c.used_gpu_hours), _amount(c.idle_gpu_hours),
        cell(c.gpu_model), cell(c.mig_profile), _amount(c.energy_kwh), _amount(c.energy_cost),
        "true" if c.at_default_rate else "false", str(c.corrects) if c.corrects else "", c.kind,
        _amount(c.carbon_kg), "billed" if c.billed else "showback",
        _amount(c.gpu_share) if c.gpu_share is not None else "",
    ]  # fmt: skip


class _Echo:
    def write(self, value: str) -> str:
        return value


def _python_csv(charges: Iterable[Line], month: Month) -> Iterator[str]:
    writer = csv.writer(_Echo(), lineterminator="\n")
    account, provider = settings.GOVERNANCE_BILLING_ACCOUNT, settings.GOVERNANCE_PROVIDER_NAME
    names = dict(Commitment.objects.values_list("pk", "name"))
    close = month_closed(month)
    invoice = close.invoice_id if close else ""
    yield writer.writerow(HEADER)
    chunk: list[str] = []
    for charge in charges:
        chunk.append(writer.writerow(focus_row(charge, month, account, provider, names, invoice)))
        if len(chunk) >= ROWS_PER_CHUNK:
            yield "".join(chunk)
            chunk = []
    if chunk:
        yield "".join(chunk)


def _safe(expression: str) -> str:
    return f"NULLIF(CASE WHEN left({expression}, 1) IN ('=', '+', '-', '@', chr(9), chr(13)) THEN '''' || {expression} ELSE {expression} END, '')"  # noqa: E501


def _time(expression: str) -> str:
    return f"""to_char({expression} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')"""


def _six(expression: str) -> str:
    return f"round({expression}, 6)::text"


WHAT = "CASE WHEN job_ref <> '' THEN ' of job ' || job_ref || ' on ' || cluster_name ELSE ' (' || cluster_name || ', ' || gpu_model || ')' END"  # noqa: E501
DESCRIPTION = f"""CASE kind
    WHEN 'unallocated' THEN 'Unallocated capacity of ' || cluster_name || ' (' || gpu_model || ')'
    WHEN 'shared' THEN 'Share of the unallocated capacity of ' || cluster_name
    WHEN 'purchase' THEN 'Commitment of ' || team_name || ' on ' || cluster_name || ' (' || gpu_model || ')'
    WHEN 'unused' THEN 'Unused commitment of ' || team_name || ' on ' || cluster_name || ' (' || gpu_model || ')'
    WHEN 'adjustment' THEN 'C' || substr(reason, 2) || {WHAT}
    ELSE 'GPU-hours of ' || CASE WHEN job_ref <> '' THEN 'job ' || job_ref ELSE team_name END || ' on ' || cluster_name
        || CASE WHEN at_default_rate THEN ' (cluster default rate)' ELSE '' END
END"""
RESOURCE = (
    "CASE WHEN job_ref <> '' THEN cluster_name || '/' || job_ref"
    " WHEN gpu_model <> '' THEN cluster_name || '/unallocated/' || gpu_model ELSE '' END"
)
SKU = "CASE WHEN mig_profile <> '' THEN gpu_model || ' MIG ' || mig_profile ELSE gpu_model END"
TAGS = "jsonb_build_object('cluster', cluster_name, 'project', project_name, 'user', user_name)::text"
QUANTITY = "CASE WHEN kind = 'purchase' THEN commitment_gpu_hours ELSE gpu_hours END"
RELATED = "commitment_id IS NOT NULL AND (kind <> 'usage' OR commitment_gpu_hours <> 0)"
KNOWN_TEAM = f"team_id IS NOT NULL AND team_name NOT IN ('{UNALLOCATED}', '{UNATTRIBUTED}')"
CONSUMED = "f.kind NOT IN (" + ", ".join(f"'{kind}'" for kind in NOT_CONSUMED) + ")"
COMMITMENT = (
    "CASE WHEN kind IN (" + ", ".join(f"'{kind}'" for kind in COMMITMENT_PRICED) + ") AND commitment_id IS NOT NULL"
    " THEN 'commitment-' || commitment_id END"
)
SKU_PRICE = f"CASE WHEN ({SKU}) <> '' THEN cluster_name || '/' || ({SKU}) || coalesce('/' || {COMMITMENT}, '') END"
# The details as jsonb would write them (keys shorter first), built as text: jsonb per row costs a third of the
# CSV's speed. Braces doubled twice: FORMATTED is formatted again with the table.
SKU_PRICE_DETAILS = f"""CASE WHEN ({SKU}) <> '' THEN '{{{{"x_Cluster": ' || to_json(cluster_name)::text
    || ', "x_GpuModel": ' || to_json(gpu_model)::text
    || CASE WHEN mig_profile <> '' THEN ', "x_MigProfile": ' || to_json(mig_profile)::text ELSE '' END
    || coalesce(', "x_CommitmentDiscountId": "' || {COMMITMENT} || '"', '') || '}}}}' END"""


def _columns() -> list[str]:
    """The FOCUS columns over a subquery `f` that formats each amount and time once per row."""
    values = [
        "f.billed_cost", "%(account)s", "%(account)s", "f.currency", "%(period_start)s", "%(period_end)s",
        "f.category", "CASE WHEN f.kind = 'adjustment' THEN 'Correction' END", "f.description", "f.period_start",
        "f.period_end", "f.contracted", "f.cost", "%(provider)s", "f.list", "f.quantity", f"'{UNIT}'", "%(provider)s",
        "%(provider)s", f"'{SERVICE_CATEGORY}'", f"'{SERVICE_NAME}'", f"CASE WHEN {CONSUMED} THEN f.hours END",
        f"CASE WHEN {CONSUMED} THEN '{UNIT}' END", "f.sub_account",
        "CASE WHEN f.sub_account IS NOT NULL THEN f.team END", "f.resource", "f.job_ref", "f.sku", "f.tags",
        "f.frequency", "f.list_unit", "f.contracted_unit", "f.cd_id", "f.cd_name", "f.cd_type", "f.cd_category",
        "f.cd_status", "f.cd_quantity", "f.cd_unit", "%(invoice)s", f"'{SERVICE_SUBCATEGORY}'", "f.sku_price",
        f"CASE WHEN f.sku IS NOT NULL THEN '{SKU_METER}' END", "f.sku_price_details", "f.idle_cost", "f.used",
        "f.idle", "f.gpu_model", "f.mig_profile", "f.kwh", "f.energy_cost", "f.at_default", "f.corrects", "f.kind",
        "f.carbon", "f.mode", "f.share",
]  # fmt: skip
    return [f'{value} AS "{name}"' for value, name in zip(values, HEADER, strict=True)]


# Each value computed once per row (OFFSET 0 keeps PostgreSQL from folding the subquery into the outer SELECT,
# which would format an amount four times); rows in statement order: usage, unallocated, shared, adjustments.
FORMATTED = f"""
SELECT kind, currency, {_six("cost")} AS cost, {_six("gpu_hours")} AS hours, {_safe(DESCRIPTION)} AS description,
    {_time("period_start")} AS period_start, {_time("period_end")} AS period_end,
    CASE WHEN {KNOWN_TEAM} THEN 'team-' || team_id END AS sub_account, {_safe("team_name")} AS team,
    {_safe(RESOURCE)} AS resource, {_safe("job_ref")} AS job_ref, {_safe(SKU)} AS sku, {_safe(TAGS)} AS tags,
    {_safe(SKU_PRICE)} AS sku_price, {_safe(SKU_PRICE_DETAILS)} AS sku_price_details,
    {_six("idle_cost")} AS idle_cost, {_six("used_gpu_hours")} AS used, {_six("idle_gpu_hours")} AS idle,
    {_safe("gpu_model")} AS gpu_model, {_safe("mig_profile")} AS mig_profile, {_six("energy_kwh")} AS kwh,
    {_six("energy_cost")} AS energy_cost, CASE WHEN at_default_rate THEN 'true' ELSE 'false' END AS at_default,
    to_char(corrects, 'YYYY-MM') AS corrects, {_six("carbon_kg")} AS carbon, {_six("gpu_share")} AS share,
    CASE WHEN billed THEN {_six("billed_cost")} ELSE '0.000000' END AS billed_cost,
    CASE WHEN billed THEN 'billed' ELSE 'showback' END AS mode, {_six("list_cost")} AS list,
    {_six("contracted_cost")} AS contracted, {_six(QUANTITY)} AS quantity,
    CASE kind WHEN 'adjustment' THEN 'Adjustment' WHEN 'purchase' THEN 'Purchase' ELSE 'Usage' END AS category,
    CASE kind WHEN 'adjustment' THEN 'One-Time' WHEN 'purchase' THEN 'Recurring' ELSE 'Usage-Based' END AS frequency,
    {_six(f"list_cost / NULLIF({QUANTITY}, 0)")} AS list_unit,
    {_six(f"contracted_cost / NULLIF({QUANTITY}, 0)")} AS contracted_unit,
    CASE WHEN {RELATED} THEN 'commitment-' || commitment_id END AS cd_id,
    CASE WHEN {RELATED} THEN {_safe("(SELECT cm.name FROM costs_commitment cm WHERE cm.id = commitment_id)")} END
        AS cd_name,
    CASE WHEN {RELATED} THEN '{COMMITMENT_TYPE}' END AS cd_type,
    CASE WHEN {RELATED} THEN '{COMMITMENT_CATEGORY}' END AS cd_category,
    CASE WHEN kind = 'unused' THEN 'Unused' WHEN kind = 'usage' AND commitment_gpu_hours <> 0 THEN 'Used' END
        AS cd_status,
    CASE WHEN {RELATED} THEN {_six("commitment_gpu_hours")} END AS cd_quantity,
    CASE WHEN {RELATED} THEN '{UNIT}' END AS cd_unit
FROM {{table}} WHERE {{where}} ORDER BY kind DESC, period_start, id OFFSET 0
"""  # noqa: S608


def focus_select(*, month: Month, team_ids: list[int | None] | None) -> tuple[str, dict]:
    """The SELECT that formats a month's statement rows as FOCUS columns, and its parameters (PostgreSQL)."""
    close = month_closed(month)
    table, where = ("costs_statementline", "close_id = %(close)s") if close else ("costs_charge", "month = %(month)s")
    params: dict[str, object] = {
        "close": close.pk if close else None, "month": month.start.date(),
        "account": cell(settings.GOVERNANCE_BILLING_ACCOUNT), "provider": cell(settings.GOVERNANCE_PROVIDER_NAME),
        "period_start": focus_time(month.start), "period_end": focus_time(month.end),
        "invoice": cell(close.invoice_id) if close else None,
    }  # fmt: skip
    if team_ids is not None:
        known = [t for t in team_ids if t is not None]
        params["teams"] = known or [0]
        where += " AND (team_id = ANY(%(teams)s)" + (" OR team_id IS NULL)" if None in team_ids else ")")
    inner = FORMATTED.format(table=table, where=where)
    return f"SELECT {', '.join(_columns())} FROM ({inner}) AS f", params  # noqa: S608


def _copy_csv(db: BaseDatabaseWrapper, sql: str, params: dict) -> Iterator[bytes]:
    with db.cursor() as cursor:
        statement = cursor.cursor.mogrify(f"COPY ({sql}) TO STDOUT (FORMAT csv, HEADER true)", params)
        with cursor.cursor.copy(statement) as copy:
            for block in copy:
                yield bytes(block)


def focus_csv(*, month: Month, team_ids: Sequence[int | None] | None = None) -> Iterator[str | bytes]:
    """The month's statement as FOCUS CSV, in chunks: header first, then one row per ledger row."""
    ids = None if team_ids is None else list(team_ids)
    # Chosen (and the statement built) now: the rows stream after the view has returned, outside the request's routing.
    db = reading_connection(Charge)
    if db.vendor == "postgresql":
        return _copy_csv(db, *focus_select(month=month, team_ids=ids))
    return _python_csv(statement_charges(month=month, team_ids=ids), month)
