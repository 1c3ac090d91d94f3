from django.urls import path

from . import views

urlpatterns = [
    path("virtual-clusters", views.VirtualClusterListView.as_view(), name="virtual-cluster-list"),
    path("virtual-clusters/<str:name>", views.VirtualClusterDetailView.as_view(), name="virtual-cluster-detail"),
]
