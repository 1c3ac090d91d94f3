"""OpenPAI's account routes: the same paths as OpenPAI's REST server v2 (no trailing slash)."""

from django.urls import path

from . import views

urlpatterns = [
    path("authn/basic/login", views.BasicLoginView.as_view(), name="authn-basic-login"),
    path("authn/basic/logout", views.BasicLogoutView.as_view(), name="authn-basic-logout"),
    path("tokens", views.TokenListView.as_view(), name="token-list"),
    path("tokens/application", views.ApplicationTokenView.as_view(), name="token-application"),
    path("tokens/<str:token>", views.TokenDetailView.as_view(), name="token-detail"),
    path("users", views.UserListView.as_view(), name="user-list"),
    path("users/me", views.MeView.as_view(), name="user-me"),
    path("users/<str:username>", views.UserDetailView.as_view(), name="user-detail"),
    path("users/<str:username>/group", views.UserGroupView.as_view(), name="user-group"),
    path("users/<str:username>/grouplist", views.UserGroupListView.as_view(), name="user-grouplist"),
    path("groups", views.GroupListView.as_view(), name="group-list"),
    path("groups/<str:groupname>", views.GroupDetailView.as_view(), name="group-detail"),
    path("groups/<str:groupname>/userlist", views.GroupUserListView.as_view(), name="group-userlist"),
]
