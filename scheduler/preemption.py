"""Choosing victims for a guaranteed gang that does not fit as things stand.

A gang may preempt opportunistic jobs anywhere its VC could use (its own bound cells and
the free pool), lower-priority jobs of its own VC, and borrowers running on cells lent
from its VC's quota — never a job still inside its minimum runtime, never single pods.
Candidates are ordered lowest priority first, then most recently started; the engine
takes the shortest prefix of that order after which the gang fits, then drops every
victim the gang can do without. If more than one victim remains, the first candidate
in that order that frees enough on its own is taken instead: fewest victims first, then
lowest priority, then most recently started.
"""

from __future__ import annotations

from typing import Callable

from .ledger import Ledger, RunningJob

# Dropping unneeded victims, or looking for a single victim that would do, costs one
# placement trial per candidate; these bound the trials.
MINIMISE_UP_TO = 32
SINGLE_VICTIM_TRIALS = 16


def _covering_binding_user(job: RunningJob) -> list[str | None]:
    users = []
    for pod in job.pods:
        owner = None
        for cell in pod.node.leaf_cells[pod.devices[0]].up:
            if cell.binding is not None:
                owner = cell.binding.user
                break
        users.append(owner)
    return users


def candidates(
    ledger: Ledger, vc: str, cohort: list[str], priority: int, skus: set[str], pool_usable: bool, now: float
) -> list[RunningJob]:
    """Running jobs this gang may preempt, in the order it should prefer to.

    ``pool_usable``: the VC still has unbound quota, so opportunistic pods on unbound
    cells are in its way too; otherwise only those on its own bound cells are."""
    useful_users = (vc, None) if pool_usable else (vc,)
    out = []

    def eligible(job: RunningJob) -> bool:
        return now - job.started_at >= job.min_runtime and any(p.node.chain.sku.name in skus for p in job.pods)

    for job in ledger.opportunistic.values():
        if eligible(job) and any(user in useful_users for user in _covering_binding_user(job)):
            out.append(job)
    for job in ledger.guaranteed_by_vc.get(vc, {}).values():
        if job.priority < priority and eligible(job):
            out.append(job)
    for other in cohort:
        for job in ledger.guaranteed_by_vc.get(other, {}).values():
            if eligible(job) and any(
                p.binding is not None and p.binding.borrowed and p.binding.owner == vc for p in job.pods
            ):
                out.append(job)
    out.sort(key=lambda j: (-1 if j.opportunistic else j.priority, -j.started_at, j.job_id))
    return out


def choose_victims(
    ordered: list[RunningJob], fits: Callable[[list[RunningJob]], bool]
) -> list[RunningJob] | None:
    """The victims to take, or ``None`` if even all candidates are not enough.

    ``fits(victims)`` must try the placement with those victims gone and leave the state
    as it found it."""
    if not ordered:
        return None
    # Gallop, then bisect: the prefix needed is usually short, and each trial costs the
    # removal of its victims, so trying everything first would be the dearest start.
    failed, size = 0, 1
    while not fits(ordered[:size]):
        if size == len(ordered):
            return None
        failed, size = size, min(2 * size, len(ordered))
    lo, hi = failed + 1, size
    while lo < hi:
        mid = (lo + hi) // 2
        if fits(ordered[:mid]):
            hi = mid
        else:
            lo = mid + 1
    victims = ordered[:lo]
    if len(victims) <= MINIMISE_UP_TO:
        for i in range(len(victims) - 1, -1, -1):
            trial = victims[:i] + victims[i + 1:]
            if trial and fits(trial):
                victims = trial
    if len(victims) > 1:
        # Fewest victims first: one job elsewhere may free as much as several here.
        for job in ordered[:SINGLE_VICTIM_TRIALS]:
            if fits([job]):
                return [job]
    return victims
