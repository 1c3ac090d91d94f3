from django import forms

from apps.clusters.models import PhysicalCell

from .models import VirtualCluster
from .services import check_shrink, entry_problems, validate_quotas


class VirtualClusterForm(forms.ModelForm):
    pinned = forms.ModelMultipleChoiceField(
        queryset=PhysicalCell.objects.exclude(pinned_id="").select_related("cluster"),
        required=False,
        label="Pinned cells",
        help_text="Physical cells this VC owns outright; only jobs naming their pinned id run there.",
    )

    class Meta:
        model = VirtualCluster
        fields = [
            "name", "tenant", "cluster", "description", "cohort", "borrowing_limit", "lending_limit",
            "weight", "max_leaf_cells_per_user", "starvation_threshold",
        ]

    confirm_shrink = forms.BooleanField(
        required=False,
        label="Shrink below running jobs",
        help_text="Needed only when the new quota is below what the VC's running jobs hold: pai lists them, "
        "and they run on as opportunistic (preemptible) jobs.",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["pinned"].initial = [p.physical_cell_id for p in self.instance.pinned_cells.all()]

    def clean(self):
        cleaned = super().clean()
        cluster = cleaned.get("cluster")
        for cell in cleaned.get("pinned") or ():
            if cluster is not None and cell.cluster_id != cluster.pk:
                self.add_error("pinned", f"Cell {cell.address} belongs to cluster {cell.cluster}, not {cluster}.")
        # The cells inline validates the whole quota; it reads the pinned cells from here.
        self.instance._pending_pinned = list(cleaned.get("pinned") or ())
        self.instance._confirm_shrink = bool(cleaned.get("confirm_shrink"))
        return cleaned


class CellsFormSet(forms.BaseInlineFormSet):
    """Refuses a quota the cluster cannot back, naming what it asks beyond what is free and
    who holds the rest, and a quota below what running jobs hold unless confirmed."""

    validate_quota = True

    def clean(self):
        super().clean()
        if not self.validate_quota or any(form.errors for form in self.forms):
            return
        vc = self.instance
        if vc.cluster_id is None:
            return
        cells, forms = [], []
        for form in self.forms:
            data = getattr(form, "cleaned_data", None) or {}
            if not data or data.get("DELETE") or not data.get("cell_type"):
                continue
            cells.append((data["cell_type"], data["count"], data.get("chain")))
            forms.append(form)
        problems = entry_problems(vc.cluster, cells)
        for index, field, message in problems:
            forms[index].add_error(field, message)
        if problems:
            return
        pinned = getattr(vc, "_pending_pinned", None)
        pinned_ids = None if pinned is None else [p.pinned_id or p.address for p in pinned]
        validate_quotas(vc.cluster, vc, cells, pinned_ids)
        if not getattr(vc, "_confirm_shrink", False):
            check_shrink(vc, cells, pinned_ids)
