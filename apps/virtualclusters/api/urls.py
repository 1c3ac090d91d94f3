from pai.api.routing import openpai_path

from . import views

urlpatterns = [
    *openpai_path("virtual-clusters", views.VirtualClusterListView.as_view(), "virtual-cluster-list"),
    *openpai_path("virtual-clusters/<str:name>", views.VirtualClusterDetailView.as_view(), "virtual-cluster-detail"),
    *openpai_path("virtual-clusters/<str:name>/quota", views.VirtualClusterQuotaView.as_view(),
                  "virtual-cluster-quota"),
    *openpai_path("virtual-clusters/<str:name>/sku-types", views.VirtualClusterSkuTypesView.as_view(),
                  "virtual-cluster-sku-types"),
    *openpai_path("cluster/sku-types", views.ClusterSkuTypesView.as_view(), "cluster-sku-types"),
]
