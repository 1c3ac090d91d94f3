"""GPU-hour budgets: a VC that has used its GPU-hours for the period admits no more guaranteed jobs.

The control plane keeps the accounts (its usage ledger, plus what running jobs have used
so far) and gives the engine, per VC, the budget's limit, what is used, and what is
reserved: the part of their first hour that running jobs have not used yet. A job needs
its GPUs for at least its declared maximum runtime, or one hour when it declares none: it
waits when that would take the VC past its limit. Within a cycle the gate reserves what it
admits, so that two jobs never count on the same last hours. Jobs that use
no GPU are never held; opportunistic jobs are not gated (they run on idle cells and are
the first to be preempted).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .placement import PodNeed
from .spec import GangRequest

DEFAULT_HOURS = 1.0


@dataclass(frozen=True)
class GpuHourBudget:
    """``limit`` GPU-hours for the period, of which ``used`` are used and ``reserved``
    promised to running jobs; ``period`` names the period in wait reasons ("this month")."""

    limit: float
    used: float
    period: str = "this period"
    reserved: float = 0.0


class BudgetGate:
    """One cycle's view of the budgets: ``refusal`` before admitting a gang, ``charge``
    once it is admitted."""

    def __init__(self, budgets: Mapping[str, GpuHourBudget], gpus_per_leaf: Mapping[str, int]) -> None:
        self.budgets = budgets
        self.gpus_per_leaf = gpus_per_leaf
        self.admitted: dict[str, float] = {}

    def gpus(self, needs: Iterable[PodNeed]) -> int:
        return sum(n.leaf_cells * self.gpus_per_leaf.get(n.sku, 0) for n in needs)

    def needed_hours(self, gang: GangRequest, needs: Iterable[PodNeed]) -> tuple[int, float]:
        """(GPUs, hours) the gang needs at least."""
        hours = gang.max_runtime / 3600 if gang.max_runtime else DEFAULT_HOURS
        return self.gpus(needs), hours

    def refusal(self, gang: GangRequest, needs: Iterable[PodNeed]) -> str | None:
        """Why the gang must wait for the VC's budget, or ``None``."""
        budget = self.budgets.get(gang.vc)
        if budget is None or gang.opportunistic:
            return None
        gpus, hours = self.needed_hours(gang, needs)
        if gpus == 0:
            return None
        reserved = budget.reserved + self.admitted.get(gang.vc, 0.0)
        if budget.used + reserved + gpus * hours <= budget.limit:
            return None
        runtime = "its maximum runtime" if gang.max_runtime else "at least an hour"
        held = f", and its running jobs hold {_hours(reserved)} more" if reserved else ""
        return (
            f"VC {gang.vc} has used {_hours(budget.used)} of {_hours(budget.limit)} GPU-hours {budget.period}{held}; "
            f"the job needs {gpus} GPU{'s' if gpus != 1 else ''} for {runtime} "
            f"({_hours(gpus * hours)} GPU-hours) and waits for the next period or a larger budget"
        )

    def charge(self, gang: GangRequest, needs: Iterable[PodNeed]) -> None:
        if gang.vc in self.budgets and not gang.opportunistic:
            gpus, hours = self.needed_hours(gang, needs)
            self.admitted[gang.vc] = self.admitted.get(gang.vc, 0.0) + gpus * hours


def _hours(value: float) -> str:
    """1,000 and 980 as people write them; fractions only where they show."""
    rounded = round(value, 1)
    return f"{rounded:,.0f}" if rounded == int(rounded) else f"{rounded:,.1f}"
