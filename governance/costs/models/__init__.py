"""The costs app's models, one module per area; every name is importable from here as before."""

from governance.costs.models.budgets import Anomaly, Budget, BudgetAlert, BudgetRequest
from governance.costs.models.common import DEFAULT_MODEL, HOURS, MONEY
from governance.costs.models.failures import PricingFailure
from governance.costs.models.ledger import CapacityDay, Charge, MonthClose, StatementLine
from governance.costs.models.overclaims import AllocatedHour, OverClaim
from governance.costs.models.summaries import JobMonth, LedgerDay
from governance.costs.models.terms import (
    BillingModeTerm,
    Commitment,
    DeclaredCapacity,
    GridIntensity,
    OwnedGpuCost,
    RateCard,
    UnallocatedPolicyTerm,
)

__all__ = [
    "DEFAULT_MODEL", "HOURS", "MONEY", "AllocatedHour", "Anomaly", "BillingModeTerm", "Budget", "BudgetAlert",
    "BudgetRequest", "CapacityDay", "Charge", "Commitment", "DeclaredCapacity", "GridIntensity", "JobMonth",
    "LedgerDay",
    "MonthClose", "OverClaim", "OwnedGpuCost", "PricingFailure", "RateCard", "StatementLine", "UnallocatedPolicyTerm",
]  # fmt: skip
