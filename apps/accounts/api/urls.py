"""OpenPAI's account routes: the same paths as OpenPAI's REST server v2, with or without a trailing slash."""

from pai.api.routing import openpai_path

from . import views

urlpatterns = [
    *openpai_path("authn/basic/login", views.BasicLoginView.as_view(), "authn-basic-login"),
    *openpai_path("authn/basic/logout", views.BasicLogoutView.as_view(), "authn-basic-logout"),
    *openpai_path("tokens", views.TokenListView.as_view(), "token-list"),
    *openpai_path("tokens/application", views.ApplicationTokenView.as_view(), "token-application"),
    *openpai_path("tokens/<str:token>", views.TokenDetailView.as_view(), "token-detail"),
    *openpai_path("users", views.UserListView.as_view(), "user-list"),
    *openpai_path("users/me", views.MeView.as_view(), "user-me"),
    *openpai_path("users/<str:username>", views.UserDetailView.as_view(), "user-detail"),
    *openpai_path("users/<str:username>/group", views.UserGroupView.as_view(), "user-group"),
    *openpai_path("users/<str:username>/grouplist", views.UserGroupListView.as_view(), "user-grouplist"),
    # OpenPAI's older singular account routes, answered by the same views.
    *openpai_path("user", views.UserListView.as_view(), "legacy-user-list"),
    *openpai_path("user/<str:username>", views.UserDetailView.as_view(), "legacy-user-detail"),
    *openpai_path("user/<str:username>/group", views.UserGroupView.as_view(), "legacy-user-group"),
    *openpai_path("user/<str:username>/grouplist", views.UserGroupListView.as_view(), "legacy-user-grouplist"),
    *(
        route
        for field in views.LegacyUserFieldView.FIELDS
        for route in openpai_path(
            f"user/<str:username>/{field}", views.LegacyUserFieldView.as_view(field=field), f"legacy-user-{field}"
        )
    ),
    *openpai_path("groups", views.GroupListView.as_view(), "group-list"),
    *openpai_path("groups/<str:groupname>", views.GroupDetailView.as_view(), "group-detail"),
    *openpai_path("groups/<str:groupname>/userlist", views.GroupUserListView.as_view(), "group-userlist"),
]
