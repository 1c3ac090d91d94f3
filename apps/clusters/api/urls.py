from rest_framework.routers import SimpleRouter

from pai.api.routing import openpai_path

from . import kubernetes, views

router = SimpleRouter()
router.register("clusters", views.ClusterViewSet, basename="cluster")
router.register(r"clusters/(?P<cluster_name>[A-Za-z0-9][A-Za-z0-9_.-]*)/cell-types", views.CellTypeViewSet,
                basename="cluster-cell-type")
router.register(r"clusters/(?P<cluster_name>[A-Za-z0-9][A-Za-z0-9_.-]*)/physical-cells", views.PhysicalCellViewSet,
                basename="cluster-physical-cell")
router.register(r"clusters/(?P<cluster_name>[A-Za-z0-9][A-Za-z0-9_.-]*)/nodes", views.NodeViewSet,
                basename="cluster-node")

urlpatterns = [
    *openpai_path("kubernetes/nodes", kubernetes.KubernetesNodeListView.as_view(), "kubernetes-nodes"),
    *openpai_path("kubernetes/pods", kubernetes.KubernetesPodListView.as_view(), "kubernetes-pods"),
    *router.urls,
]
