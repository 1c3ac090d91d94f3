from django.urls import path

from . import views

urlpatterns = [
    path("storages", views.StorageListView.as_view(), name="storage-list"),
    path("storages/<str:name>", views.StorageDetailView.as_view(), name="storage-detail"),
]
