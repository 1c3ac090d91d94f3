"""Choosing victims for a guaranteed gang that does not fit as things stand.

A gang may preempt opportunistic jobs anywhere its VC could use (its own bound cells,
the cells it lent, and the free pool; any device of a pod counts), lower-priority jobs
of its own VC, and borrowers running on cells lent from its VC's quota — never a job
still inside its minimum runtime, never single pods, never a job already being stopped
or claimed by another preemption.

Victims are chosen locally: the gang is placed inside one candidate cell — a node when
it fits on one, else the smallest cell above the node (a rack) that can hold it, or, for
a gang of several pods when that stops fewer gangs than any one cell would, the
top-level cells of one chain — and only jobs running there are candidates. Every candidate cell gets an estimate of the
victims it would cost (whole gangs, fewest first, then lowest priority, then most
recently started, then fewest devices); the cheapest are tried for real, victims the
gang can do without are dropped, and the cheapest placement that works wins. Every
victim holds devices the gang's placement uses: a gang whose cells the preemptor would
not use is never killed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

from .cells import Binding, Cell, Node, Topology
from .ledger import Ledger, RunningJob
from .placement import Blocked, PodNeed, _unblocked_idle

# How many candidate cells are tried for real (placement trials) before the cheapest
# that worked is taken; the estimates order them, so the first few nearly always win.
SCOPE_TRIALS = 8
# Single victims are tried first, cheapest first; this bounds those trials.
SINGLE_VICTIM_TRIALS = 24
# When a cell's estimated victims are not enough (the estimate does not see every quota
# rule), more of the cell's candidates are added, cheapest first, for this many cells;
# dropping the ones not needed afterwards costs a trial each, for up to this many.
ESCALATIONS = 2
PRUNE_UP_TO = 24

Devices = frozenset[tuple[int, int]]  # (node cell id, device index)
Trial = Callable[[list[RunningJob], Mapping[str, Cell], list[PodNeed]], "Devices | None"]


@dataclass(frozen=True)
class Choice:
    victims: tuple[RunningJob, ...]
    scopes: dict[str, Cell]  # SKU -> the cell the gang's pods of that SKU go in


def _in_the_way(job: RunningJob, vc: str, pool_usable: bool) -> bool:
    """Whether an opportunistic job holds a device of a cell the VC uses or lent (it takes
    lent cells back by preempting their borrowers) or, with ``pool_usable``, of no VC's
    cell. Every device counts: a pod may span cells of several VCs."""
    for pod in job.pods:
        leaf_cells = pod.node.leaf_cells
        for d in pod.devices:
            binding = None
            for cell in leaf_cells[d].up:
                if cell.binding is not None:
                    binding = cell.binding
                    break
            if binding is None:
                if pool_usable:
                    return True
            elif binding.user == vc or binding.owner == vc:
                return True
    return False


def candidates(
    ledger: Ledger, vc: str, cohort: list[str], priority: int, skus: set[str], pool_usable: bool, now: float,
    claimed: set[str],
) -> list[RunningJob]:
    """Running jobs this gang may preempt, cheapest first.

    ``pool_usable``: the VC still has unbound quota (or may get some back from its
    borrowers), so opportunistic pods on unbound cells are in its way too; otherwise
    only those on its own bound cells, or cells it lent, are.
    ``claimed``: victims of pending preemptions, which no one else may pick."""
    out = []

    def eligible(job: RunningJob) -> bool:
        return (
            now - job.started_at >= job.min_runtime
            and not skus.isdisjoint(job.skus())
            and job.job_id not in claimed
        )

    for job in ledger.opportunistic.values():
        if eligible(job) and _in_the_way(job, vc, pool_usable):
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
    out.sort(key=victim_order)
    return out


def victim_order(job: RunningJob) -> tuple:
    """Cheapest victim first: lowest priority, most recently started, fewest devices."""
    return (victim_priority(job), -job.started_at, sum(len(p.devices) for p in job.pods), job.job_id)


def victim_priority(job: RunningJob) -> int:
    return -1 if job.opportunistic else job.priority


def cost(victims: list[RunningJob] | tuple[RunningJob, ...]) -> tuple:
    """What a set of victims costs, to be minimised: fewest gangs, then lowest
    priorities, then most recently started, then fewest devices."""
    return (
        len(victims),
        tuple(sorted((victim_priority(j) for j in victims), reverse=True)),
        tuple(sorted(-j.started_at for j in victims)),
        sum(len(p.devices) for j in victims for p in j.pods),
        tuple(sorted(j.job_id for j in victims)),
    )


def _cheapest_cover(items: list[tuple[RunningJob, int]], deficit: int) -> list[RunningJob] | None:
    """The cheapest jobs among ``items`` (job, devices it frees here) freeing ``deficit``."""
    if sum(n for _, n in items) < deficit:
        return None
    best = None
    for order in (
        sorted(items, key=lambda i: victim_order(i[0])),
        sorted(items, key=lambda i: (-i[1], victim_order(i[0]))),
    ):
        taken, freed = [], 0
        for job, n in order:
            if freed >= deficit:
                break
            taken.append((job, n))
            freed += n
        for item in sorted(taken, key=lambda i: victim_order(i[0]), reverse=True):
            if freed - item[1] >= deficit:
                taken.remove(item)
                freed -= item[1]
        jobs = [j for j, _ in taken]
        if best is None or cost(jobs) < cost(best):
            best = jobs
    return best


class VictimSearch:
    """One gang's search for victims. ``trial(victims, scopes, needs)`` must place
    ``needs`` with those victims gone, inside ``scopes``, leave the state as it found it,
    and return the devices the placement took (``None`` if it does not fit)."""

    def __init__(
        self, topology: Topology, blocked: Blocked, trial: Trial, vc: str, fresh: Callable[[str, int], int],
        bindings: list[Binding], lent: list[Binding] = (),
    ) -> None:
        self.topology = topology
        self.blocked = blocked
        self.trial = trial
        self.vc = vc
        # fresh(sku, k): how many more cells of k leaves the VC can bind (its unbound quota).
        self.fresh = fresh
        # Cells of the VC's quota lent to other VCs, when their borrowers are candidates:
        # the gang may take them back, so they count as the VC's own here.
        self.lent = {b.cell.id for b in lent}
        # The VC's cells inside nodes, by node: a node covered only by those is usable.
        self.inside: dict[Node, int] = {}
        for binding in (*bindings, *lent):
            if binding.cell.node is not None and binding.cell.level < binding.cell.chain.node_level:
                self.inside[binding.cell.node] = self.inside.get(binding.cell.node, 0) + 1

    def _own(self, node: Node) -> bool:
        """Whether a cell of the VC's (its own, borrowed, or lent and reclaimable) holds
        the whole node."""
        return any(
            c.binding is not None and (c.binding.user == self.vc or c.id in self.lent) for c in node.cell.up
        )

    def choose(self, needs: list[PodNeed], ordered: list[RunningJob]) -> Choice | None:
        skus = sorted({n.sku for n in needs})
        victims: list[RunningJob] = []
        scopes: dict[str, Cell] = {}
        for sku in skus:
            pods = [n for n in needs if n.sku == sku]
            if len(skus) > 1 and self.trial(victims, scopes, pods) is not None:
                continue  # this SKU's pods fit as things stand
            found = self._for_sku(sku, pods, [j for j in ordered if j not in victims], victims, scopes)
            if found is None:
                return None
            more, scope = found
            victims += more
            if scope is not None:
                scopes[sku] = scope
        if not victims or self.trial(victims, scopes, needs) is None:
            return None
        return Choice(tuple(victims), scopes)

    # --- one SKU ---------------------------------------------------------------------

    def _for_sku(
        self, sku: str, pods: list[PodNeed], ordered: list[RunningJob], prior: list[RunningJob],
        scopes: dict[str, Cell],
    ) -> tuple[list[RunningJob], Cell | None] | None:
        chain = self.topology.chains[sku]
        mine = [j for j in ordered if any(p.node.chain is chain for p in j.pods)]
        if not mine:
            return None
        total = sum(p.leaf_cells for p in pods)
        if any(p.pinned_cell is not None for p in pods):
            # Pinned pods have their cells already: only whole-chain trials make sense.
            return self._global(sku, pods, mine, prior, scopes)
        single = self._single_victim(sku, pods, total, mine, prior, scopes)
        if single is not None:
            return single
        on_node = self._on_node(sku, mine)

        def in_scope(scope: Cell | None) -> list[RunningJob]:
            found = {
                j.job_id: j for node, jobs in on_node.items() if scope is None or scope in node.cell.up for j, _ in jobs
            }
            return list(found.values())

        estimates = self._estimates(chain.node_size, pods, total, on_node)
        spanning = []
        if len(pods) > 1:
            # The gang may also span the top-level cells of one chain, victims chosen over
            # all its nodes: taken when that stops fewer gangs than any one cell would
            # (on a tie, the gang stays inside one cell).
            for line in sorted({n.cell.line for n in on_node}):
                nodes = [n for root in chain.line_roots[line] for n in root.nodes]
                victims = self._greedy(nodes, pods, on_node)
                if victims:
                    spanning.append((cost(victims), victims, None))
            spanning.sort(key=lambda e: e[0])
            if spanning and (not estimates or spanning[0][0][0] < estimates[0][0][0]):
                estimates = sorted(estimates + spanning[:1], key=lambda e: (e[0][0], e[2] is None, e[0]))
        best = self._cheapest(sku, pods, prior, scopes, estimates, in_scope)
        if best is None and spanning:
            # No one cell can hold the gang with victims of its own.
            best = self._cheapest(sku, pods, prior, scopes, spanning)
        return best

    def _cheapest(
        self, sku: str, pods: list[PodNeed], prior: list[RunningJob], scopes: dict[str, Cell],
        estimates: list[tuple[tuple, list[RunningJob], Cell | None]],
        in_scope: Callable[[Cell | None], list[RunningJob]] | None = None,
    ) -> tuple[list[RunningJob], Cell | None] | None:
        """Of the estimated plans, cheapest first, the cheapest that works for real."""
        best: tuple[tuple, list[RunningJob], Cell | None] | None = None
        escalations = 0
        for i, (estimate, victims, scope) in enumerate(estimates):
            if best is not None and (i >= SCOPE_TRIALS or estimate > best[0]):
                break
            if best is None and i >= 2 * SCOPE_TRIALS:
                break
            kept = self._verify(sku, pods, victims, scope, prior, scopes)
            if kept is None and escalations < ESCALATIONS and in_scope is not None and scope is not None:
                escalations += 1
                rest = sorted((j for j in in_scope(scope) if j not in victims), key=victim_order)
                kept = self._prefix(sku, pods, victims + rest, scope, prior, scopes)
            if kept is not None and (best is None or cost(kept) < best[0]):
                best = (cost(kept), kept, scope)
        return None if best is None else (best[1], best[2])

    @staticmethod
    def _nodes(job: RunningJob, sku: str) -> list[Node]:
        return sorted({p.node for p in job.pods if p.node.chain.sku.name == sku}, key=lambda n: n.index)

    @staticmethod
    def _region(node: Node, total: int) -> Cell | None:
        """The smallest cell above the node that holds ``total`` leaves."""
        return next((a for a in node.cell.up[1:] if a.leaves >= total), None)

    def _scope_for(self, node: Node, pods: list[PodNeed], total: int) -> Cell | None:
        if total <= node.size:
            return node.cell
        return self._region(node, total)

    def _single_victim(
        self, sku: str, pods: list[PodNeed], total: int, mine: list[RunningJob], prior: list[RunningJob],
        scopes: dict[str, Cell],
    ) -> tuple[list[RunningJob], Cell] | None:
        """The cheapest single victim that makes room, if any: candidates come cheapest
        first, so the first that works is the best choice of all."""
        trials = 0
        for job in mine:
            for node in self._nodes(job, sku):
                scope = self._scope_for(node, pods, total)
                if scope is None or not self._might_fit(scope, pods, total, [job]):
                    continue
                trials += 1
                used = self.trial(prior + [job], {**scopes, sku: scope}, pods)
                if used is not None and _overlaps(job, used):
                    return [job], scope
                if trials >= SINGLE_VICTIM_TRIALS:
                    return None
        return None

    def _might_fit(self, scope: Cell, pods: list[PodNeed], total: int, victims: list[RunningJob]) -> bool:
        """A quick necessary condition: idle plus freed devices in the scope, and on
        each node enough for the largest pod somewhere."""
        freed: dict[Node, int] = {}
        for job in victims:
            for pod in job.pods:
                if scope in pod.node.cell.up:
                    freed[pod.node] = freed.get(pod.node, 0) + len(pod.devices)
        nodes = (scope.node,) if scope.node is not None else scope.nodes
        room = [_unblocked_idle(n, n.cell, self.blocked) + freed.get(n, 0) for n in nodes if n.healthy]
        return sum(room) >= total and max(room, default=0) >= max(p.leaf_cells for p in pods)

    @staticmethod
    def _on_node(sku: str, mine: list[RunningJob]) -> dict[Node, list[tuple[RunningJob, int]]]:
        """Per node of the SKU, the candidates on it and how many devices each frees there."""
        freed: dict[Node, dict[str, int]] = {}
        for job in mine:
            for pod in job.pods:
                if pod.node.chain.sku.name == sku:
                    per_job = freed.setdefault(pod.node, {})
                    per_job[job.job_id] = per_job.get(job.job_id, 0) + len(pod.devices)
        by_id = {j.job_id: j for j in mine}
        return {node: [(by_id[j], n) for j, n in sorted(jobs.items())] for node, jobs in freed.items()}

    def _estimates(
        self, node_size: int, pods: list[PodNeed], total: int, on_node: dict[Node, list[tuple[RunningJob, int]]]
    ) -> list[tuple[tuple, list[RunningJob], Cell | None]]:
        """For every cell where candidates run (nodes if the gang fits on one, and the
        cells above that hold it), the victims a greedy plan would take there."""
        scopes: dict[int, Cell] = {}
        for node in sorted(on_node, key=lambda n: n.index):
            if not node.healthy:
                continue
            if total <= node_size:
                scopes.setdefault(node.cell.id, node.cell)
            if len(pods) > 1 or total > node_size:
                region = self._region(node, total)
                if region is not None:
                    scopes.setdefault(region.id, region)
        out = []
        for scope_id in sorted(scopes):
            scope = scopes[scope_id]
            nodes = [scope.node] if scope.node is not None else scope.nodes
            victims = self._greedy(nodes, pods, on_node)
            # No victims: the gang fits the devices here but not the quota (the VC's
            # cells are held by its own jobs); the trials add the cell's candidates.
            if victims is not None:
                out.append((cost(victims), victims, scope))
        out.sort(key=lambda e: (e[0], e[2].id))
        return out

    def _greedy(
        self, nodes: list[Node], pods: list[PodNeed], on_node: dict[Node, list[tuple[RunningJob, int]]]
    ) -> list[RunningJob] | None:
        """Pods largest first, each onto the node (of ``nodes``) where freeing room for it
        costs least given the victims already taken."""
        nodes = [n for n in nodes if n.healthy]
        own = {n for n in nodes if self._own(n)}
        # A node not yet the VC's needs a cell of its unbound quota, and no other VC's cell on it.
        nodes = [n for n in nodes if n in own or n.cover == self.inside.get(n, 0)]
        room = {n: _unblocked_idle(n, n.cell, self.blocked) for n in nodes}
        fresh = self.fresh(nodes[0].chain.sku.name, nodes[0].size) if nodes else 0
        taken: set[Node] = set()
        victims: list[RunningJob] = []
        for need in sorted(pods, key=lambda p: -p.leaf_cells):
            k = need.leaf_cells
            best = None
            for node in nodes:
                if not node.healthy:
                    continue
                if k == node.size and node not in own and node not in taken and fresh <= 0:
                    continue
                if room[node] >= k:
                    choice: tuple = ((), room[node] - k, node.index, [])
                else:
                    items = [(j, n) for j, n in on_node.get(node, ()) if j not in victims]
                    extra = _cheapest_cover(items, k - room[node])
                    if extra is None:
                        continue
                    # Equally many victims: those freeing most devices in the scope first
                    # (a gang spanning nodes frees room for later pods too).
                    c = cost(victims + extra)
                    freed = sum(len(p.devices) for j in extra for p in j.pods if p.node in room)
                    choice = ((c[0], c[1], -freed, *c[2:]), 0, node.index, extra)
                if best is None or choice[:3] < best[:3]:
                    best = choice
            if best is None:
                return None
            extra = best[3]
            node = next(n for n in nodes if n.index == best[2])
            if k == node.size and node not in own and node not in taken:
                # A whole node the VC does not hold yet takes a cell of its unbound quota.
                fresh -= 1
                taken.add(node)
            for job in extra:
                victims.append(job)
                for pod in job.pods:
                    if pod.node in room:
                        room[pod.node] += len(pod.devices)
            room[node] -= k
        return victims

    def _verify(
        self, sku: str, pods: list[PodNeed], victims: list[RunningJob], scope: Cell | None,
        prior: list[RunningJob], scopes: dict[str, Cell],
    ) -> list[RunningJob] | None:
        """Try the victims for real; drop those the gang can do without (dearest first);
        refuse if one it needs holds none of the devices the placement takes."""
        inside = {**scopes, sku: scope} if scope is not None else dict(scopes)
        used = self.trial(prior + victims, inside, pods)
        if used is None:
            return None
        kept = list(victims)
        for job in sorted(victims, key=victim_order, reverse=True):
            if len(kept) == 1:
                break
            trial = [j for j in kept if j is not job]
            fewer = self.trial(prior + trial, inside, pods)
            if fewer is not None:
                kept, used = trial, fewer
        if not all(_overlaps(j, used) for j in kept):
            return None
        return kept

    def _global(
        self, sku: str, pods: list[PodNeed], mine: list[RunningJob], prior: list[RunningJob], scopes: dict[str, Cell]
    ) -> tuple[list[RunningJob], None] | None:
        """For gangs with pinned pods: the shortest prefix of the candidates, cheapest
        first, after which the gang fits (see ``_prefix``)."""
        kept = self._prefix(sku, pods, mine, None, prior, scopes)
        return None if kept is None else (kept, None)

    def _prefix(
        self, sku: str, pods: list[PodNeed], ordered: list[RunningJob], scope: Cell | None,
        prior: list[RunningJob], scopes: dict[str, Cell],
    ) -> list[RunningJob] | None:
        """The shortest prefix of ``ordered`` after which the gang fits (in ``scope``),
        minus those it can do without; every one left must hold devices it uses."""
        inside = {**scopes, sku: scope} if scope is not None else dict(scopes)
        fits = lambda victims: self.trial(prior + victims, inside, pods)  # noqa: E731
        if not ordered:
            return None
        failed, size = 0, 1
        while fits(ordered[:size]) is None:
            if size == len(ordered):
                return None
            failed, size = size, min(2 * size, len(ordered))
        lo, hi = failed + 1, size
        while lo < hi:
            mid = (lo + hi) // 2
            if fits(ordered[:mid]) is not None:
                hi = mid
            else:
                lo = mid + 1
        kept = ordered[:lo]
        used = fits(kept)
        if len(kept) <= PRUNE_UP_TO:
            for job in sorted(kept, key=victim_order, reverse=True):
                trial = [j for j in kept if j is not job]
                if trial:
                    fewer = fits(trial)
                    if fewer is not None:
                        kept, used = trial, fewer
        if used is None or not all(_overlaps(j, used) for j in kept):
            return None
        return kept


def _overlaps(job: RunningJob, used: Devices) -> bool:
    return any((pod.node.cell.id, d) in used for pod in job.pods for d in pod.devices)
