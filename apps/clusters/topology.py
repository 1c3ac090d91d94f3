"""Arithmetic over a cluster's cell chains: how many leaf cells (devices) a cell type holds."""

from functools import lru_cache


class CellChains:
    """The cell types of one cluster, loaded once: leaf SKU and leaf count per cell type."""

    def __init__(self, cell_types):
        self.by_id = {ct.pk: ct for ct in cell_types}
        self.by_name = {ct.name: ct for ct in cell_types}

    @classmethod
    def for_cluster(cls, cluster):
        return cls(list(cluster.cell_types.all()))

    def leaf(self, cell_type):
        node = cell_type
        while node.child_id is not None:
            node = self.by_id[node.child_id]
        return node

    def leaf_count(self, cell_type):
        return _leaf_count(self, cell_type.pk)

    def __hash__(self):
        return id(self)


@lru_cache(maxsize=4096)
def _leaf_count(chains, cell_type_id):
    ct = chains.by_id[cell_type_id]
    if ct.child_id is None:
        return 1
    return ct.child_count * _leaf_count(chains, ct.child_id)
