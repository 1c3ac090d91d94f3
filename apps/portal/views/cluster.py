"""The cluster page, for platform admins: every node's devices (used, free, bad) grouped
by rack, and every VC's guarantee and use, from the engine rebuilt as the worker holds
it (`apps.virtualclusters.status`). Like the other platform-admin-only routes, anyone
else gets 403 (there is no object whose existence the answer could tell)."""

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.shortcuts import render
from django.views.decorators.http import require_GET

from apps.accounts.roles import is_platform_admin
from apps.clusters.models import Cluster
from apps.virtualclusters.capacity import guaranteed_leaf_cells
from apps.virtualclusters.status import cluster_state, node_groups, vc_cells


def _vc_bars(state, groups):
    """Per VC and SKU: leaf cells guaranteed, used (guaranteed or borrowed), opportunistic,
    as a share of the cluster's leaf cells of that SKU."""
    totals = {}
    for group in groups:
        for node in group.nodes:
            totals[node.sku] = totals.get(node.sku, 0) + node.devices
    bars = []
    for vc in state.vcs:
        guaranteed = guaranteed_leaf_cells(vc, state.chains)
        _rows, used, opportunistic = vc_cells(state, vc)
        for sku in sorted(set(guaranteed) | set(used) | set(opportunistic)):
            total = totals.get(sku, 0) or 1
            g, u, o = guaranteed.get(sku, 0), used.get(sku, 0), opportunistic.get(sku, 0)
            bars.append({
                "vc": vc.name, "sku": sku, "guaranteed": g, "used": u, "opportunistic": o, "total": totals.get(sku, 0),
                "borrowed": max(0, u - g),
                "w_used": round(100 * min(u, g) / total, 1), "w_borrowed": round(100 * max(0, u - g) / total, 1),
                "w_opp": round(100 * o / total, 1), "w_guaranteed": round(100 * g / total, 1),
            })
    return bars


@login_required
@require_GET
def cluster_page(request):
    if not is_platform_admin(request.user):
        raise PermissionDenied("The cluster page is for platform admins.")
    clusters = []
    for cluster in Cluster.objects.order_by("name"):
        state = cluster_state(cluster)
        entry = {"cluster": cluster, "error": state.error, "groups": [], "bars": []}
        if state.engine is not None:
            entry["groups"] = node_groups(state)
            entry["bars"] = _vc_bars(state, entry["groups"])
            entry["totals"] = {
                k: sum(g.totals[k] for g in entry["groups"]) for k in ("devices", "used", "foreign", "bad", "free")
            }
        clusters.append(entry)
    return render(request, "portal/cluster.html", {"clusters": clusters})
