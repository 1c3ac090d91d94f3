"""Arithmetic over a cluster's cell chains: how many leaf cells (devices) a cell type holds."""


class CellChains:
    """The cell types of one cluster, loaded once: leaf SKU and leaf count per cell type."""

    def __init__(self, cell_types):
        self.by_id = {ct.pk: ct for ct in cell_types}
        self.by_name = {ct.name: ct for ct in cell_types}
        self._leaf_counts = {}

    @classmethod
    def for_cluster(cls, cluster):
        return cls(list(cluster.cell_types.all()))

    def leaf(self, cell_type):
        node = cell_type
        while node.child_id is not None:
            node = self.by_id[node.child_id]
        return node

    def leaf_count(self, cell_type):
        count = self._leaf_counts.get(cell_type.pk)
        if count is None:
            count = 1 if cell_type.child_id is None else cell_type.child_count * self.leaf_count(
                self.by_id[cell_type.child_id]
            )
            self._leaf_counts[cell_type.pk] = count
        return count
