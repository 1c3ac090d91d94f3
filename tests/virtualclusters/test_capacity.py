from apps.clusters.topology import CellChains
from apps.virtualclusters.capacity import guaranteed_leaf_cells, resources_of_leaf_cells


def test_vc_cells_count_in_leaf_cells_per_sku(world):
    # team_a: 2 whole 8-GPU nodes and one CPU node of 8 CPU cells.
    assert guaranteed_leaf_cells(world.vc_a) == {"A100": 16, "CPU": 8}
    # team_b: 1 node (8) + 4 switches of 2 GPUs (8).
    assert guaranteed_leaf_cells(world.vc_b) == {"A100": 16, "CPU": 8}


def test_leaf_cells_convert_to_openpai_resources(world):
    chains = CellChains.for_cluster(world.cluster)
    resources = resources_of_leaf_cells({"A100": 2, "CPU": 3}, chains)
    assert resources == {"cpu": 2 * 8 + 3 * 4, "memory": 2 * 65536 + 3 * 16384, "gpu": 2}


def test_cluster_capacity_counts_every_physical_cell(world):
    from apps.virtualclusters.capacity import cluster_leaf_cells

    assert cluster_leaf_cells(world.cluster) == {"A100": 32, "CPU": 16}
