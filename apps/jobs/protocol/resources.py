"""Whether a VC can hold a job, in leaf cells (devices of a SKU).

The request rule itself (`leaf_cells_for`) is the scheduler engine's, so that admission
here and placement there count a task the same way.
"""

from dataclasses import dataclass

from scheduler import SkuSpec as Sku
from scheduler import leaf_cells_for

from .errors import ProtocolError, at


@dataclass(frozen=True)
class TaskRolePlan:
    sku: Sku
    cells_per_instance: int
    instances: int

    @property
    def cells(self):
        return self.cells_per_instance * self.instances


def sku_number(settings):
    """Leaf cells per instance a hivedScheduler task role names: `skuNumber`, or OpenPAI's
    webportal's `skuNum` (the same count); None when neither is given."""
    value = settings.get("skuNumber")
    return value if value is not None else settings.get("skuNum")


def plan_leaf_cells(document, vc_name, skus, guaranteed, gang, holder=None):
    """{task role: TaskRolePlan} for the job in a VC, or ProtocolError naming the numbers.

    `skus`: the cluster's leaf cell types by name; `guaranteed`: the leaf cells per SKU
    name the job could ever use — the VC's quota, or for an opportunistic job the whole
    cluster's cells, in which case `holder` names them ("cluster 'x'"). A task with
    `gpu: 0` runs on a CPU SKU; without `skuType` the SKU of the right kind with the most
    cells is used.
    """
    holder = holder or f"virtual cluster '{vc_name}'"
    hived = ((document.get("extras") or {}).get("hivedScheduler") or {}).get("taskRoles") or {}
    held = {name: count for name, count in guaranteed.items() if count > 0 and name in skus}
    offer = ", ".join(f"{name}: {count} leaf cells" for name, count in sorted(held.items())) or "no cells"
    plans, errors = {}, []
    for role, spec in document["taskRoles"].items():
        resources = spec["resourcePerInstance"]
        gpu, cpu, memory = resources["gpu"], resources["cpu"], resources["memoryMB"]
        settings = hived.get(role) or {}
        sku_name = settings.get("skuType")
        if sku_name is not None:
            path = ["extras", "hivedScheduler", "taskRoles", role, "skuType"]
            if sku_name not in held:
                errors.append(at(path, f"{holder} has no SKU '{sku_name}' (it has {offer})"))
                continue
            sku = skus[sku_name]
            if gpu == 0 and sku.gpu:
                errors.append(at(path, f"a CPU-only task (gpu: 0) needs a CPU SKU, and '{sku_name}' has "
                                       f"{sku.gpu} GPU(s) per leaf cell"))
                continue
            if gpu > 0 and not sku.gpu:
                errors.append(at(path, f"SKU '{sku_name}' has no GPU, and the task asks for {gpu}"))
                continue
        else:
            kind = [skus[name] for name in held if bool(skus[name].gpu) == (gpu > 0)]
            if not kind:
                wanted = "GPU SKU" if gpu > 0 else "CPU SKU (gpu: 0)"
                errors.append(at(["taskRoles", role], f"{holder} has no {wanted} "
                                                      f"(it has {offer})"))
                continue
            sku = min(kind, key=lambda s: (-held[s.name], s.name))
        try:
            per_instance = sku_number(settings) or leaf_cells_for(sku, gpu, cpu, memory)
        except ValueError as exc:
            errors.append(at(["taskRoles", role, "resourcePerInstance"], str(exc)))
            continue
        if per_instance > held[sku.name]:
            errors.append(at(["taskRoles", role], f"one instance needs {per_instance} {sku.name} leaf cells, "
                                                  f"more than {holder} holds "
                                                  f"({held[sku.name]})"))
            continue
        plans[role] = TaskRolePlan(sku=sku, cells_per_instance=per_instance, instances=spec.get("instances", 1))
    if not errors and gang:
        needed = {}
        for plan in plans.values():
            needed[plan.sku.name] = needed.get(plan.sku.name, 0) + plan.cells
        for name, count in sorted(needed.items()):
            if count > held[name]:
                errors.append(at(["taskRoles"], f"the job needs {count} {name} leaf cells at once (gang "
                                                 f"allocation), more than {holder} holds "
                                                 f"({held[name]})"))
    if errors:
        raise ProtocolError(errors)
    return plans
