"""Preemptions in progress: a gang holding a reservation on the cells it preempts.

A preemption goes through two steps, one cycle apart, so that one that would be undone
at once (its gang cancelled, a node of it gone bad, room appearing elsewhere) never
stops anyone:

- *planned*: the victims are chosen and keep running untouched; the planned devices
  are reserved (no other gang is placed there) and the victims cannot be picked by
  another preemptor;
- *committed*, at the gang's next turn if the victims still make room: they are told to
  stop and, until their pods are gone, keep their devices (``terminating``); the gang
  holds its VC's quota and the planned devices (``preempting``) and runs once every
  victim has been released.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .cells import Cell, Node, Topology
from .decisions import PodPlacement
from .ledger import RunningJob
from .queue import PREEMPTION, Reservation


@dataclass
class PendingPreemption:
    job_id: str
    vc: str
    user: str
    priority: int
    decided_at: float
    victims: list[str]  # jobs still to be gone
    pods: tuple[PodPlacement, ...]  # where the gang goes
    scopes: dict[str, Cell] = field(default_factory=dict)  # SKU -> the cell its pods stay in
    job: RunningJob | None = None  # once committed: the preempting job in the ledger

    @property
    def committed(self) -> bool:
        return self.job is not None

    @property
    def borrowing(self) -> bool:
        return any(p.lent_by is not None for p in self.pods)

    def reservation(self, topology: Topology) -> Reservation:
        devices: dict[int, frozenset[int]] = {}
        names = set()
        for pod in self.pods:
            node, own = topology.locate(pod.node, pod.devices)
            devices[node.cell.id] = devices.get(node.cell.id, frozenset()) | frozenset(own)
            names.add(node.name)
        return Reservation(
            job_id=self.job_id,
            devices=tuple(sorted(devices.items())),
            nodes=tuple(sorted(names)),
            until=None,
            kind=PREEMPTION,
            victims=tuple(self.victims),
            priority=self.priority,
        )

    def nodes(self, topology: Topology) -> list[Node]:
        nodes = {}
        for pod in self.pods:
            node = topology.locate(pod.node, pod.devices)[0]
            nodes[node.name] = node
        return [nodes[name] for name in sorted(nodes)]


def plan_scopes(topology: Topology, pods: tuple[PodPlacement, ...]) -> dict[str, Cell]:
    """Per SKU, the smallest cell holding every planned pod: where the gang stays when
    the preemption is committed (and what a restore rebuilds from the pods alone)."""
    by_sku: dict[str, list[Node]] = {}
    for pod in pods:
        node = topology.locate(pod.node, pod.devices)[0]
        by_sku.setdefault(node.chain.sku.name, []).append(node)
    scopes = {}
    for sku, nodes in sorted(by_sku.items()):
        common = [c for c in nodes[0].cell.up if all(c in n.cell.up for n in nodes[1:])]
        if common:
            scopes[sku] = common[0]
    return scopes
