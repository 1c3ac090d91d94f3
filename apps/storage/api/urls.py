from pai.api.routing import openpai_path

from . import views

urlpatterns = [
    *openpai_path("storages", views.StorageListView.as_view(), "storage-list"),
    *openpai_path("storages/<str:name>", views.StorageDetailView.as_view(), "storage-detail"),
]
