"""OpenPAI's authentication, token, user and group routes.

Who may do what (pai's scoping of OpenPAI's admin-only routes):
- platform admins: everything, as OpenPAI's admins;
- tenant admins: create users into their team's VCs, and manage accounts that belong
  only to teams they administer (never platform admins); create and manage their
  team's groups;
- everyone: read and change their own account (`/users/me`), read the groups of their
  teams and the built-in groups.
An account or group the requester cannot see answers 404, one they see but may not
change answers 403.
"""

from django.contrib.auth import authenticate, get_user_model, logout
from django.db import IntegrityError
from django.db.models import ProtectedError
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.exceptions import Throttled
from rest_framework.parsers import MultiPartParser
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.response import Response

from apps.storage.models import StorageConfig
from apps.tenants.models import Tenant
from apps.virtualclusters.models import VirtualCluster
from pai.api.errors import (
    ApiError,
    ConflictGroupError,
    ConflictUserError,
    ForbiddenError,
    IncorrectPasswordError,
    NoGroupError,
    NoUserError,
    NoVirtualClusterError,
    NotFoundError,
    RemoveAdminError,
)
from pai.api.parsers import FormParser, JSONParser
from pai.api.permissions import BasicModeOnly, NotApplicationToken
from pai.api.views import PAGE_PARAMETERS, ApiView, ErrorSerializer, MessageSerializer, message, openpai_page

from .. import lockout, services, usernames
from ..models import ApiToken, Group
from ..roles import ADMIN_GROUP, DEFAULT_GROUP, admin_tenant_ids, is_platform_admin
from ..selectors import users_manageable_by, users_visible_to
from ..tokens import digest_of
from . import serializers as s

ERRORS = {code: OpenApiResponse(ErrorSerializer, description=name) for code, name in (
    (400, "Invalid input (InvalidParametersError, IncorrectPasswordError...); the message names the field"),
    (401, "UnauthorizedUserError"),
    (403, "ForbiddenUserError"),
    (404, "NoUserError / NoGroupError"),
    (409, "ConflictUserError / ConflictGroupError"),
)}


def errors(*codes):
    return {code: ERRORS[code] for code in codes}


def _epoch_ms(value):
    return int(value.timestamp() * 1000) if value else None


# --- Authentication -------------------------------------------------------------------
class BasicLoginView(ApiView):
    authentication_classes = []
    permission_classes = [AllowAny, BasicModeOnly]
    parser_classes = [JSONParser, FormParser, MultiPartParser]

    @extend_schema(
        tags=["authn"],
        operation_id="basicLogin",
        summary="Get an access token using username and password (basic mode only).",
        description="Form-encoded (as OpenPAI documents it) or JSON. The token expires after `expiration` "
        "seconds (default 7 days), at most `PAI_LOGIN_TOKEN_MAX_SECONDS` (7 days by default; longer is shortened "
        "to it). A password change, a deactivation or a removal from a team revokes every token of the user, "
        "login and application. Wrong user name and wrong password answer alike, so that the answer "
        "does not tell which accounts exist. After `PAI_LOGIN_MAX_FAILURES` failures for a user name from an "
        "address, its logins from there are refused with 429 for `PAI_LOGIN_LOCKOUT_SECONDS`; many failures for a "
        "name from anywhere, or from one address for many names, lock out only addresses the user never signed "
        "in from.",
        request={"application/x-www-form-urlencoded": s.LoginSerializer, "application/json": s.LoginSerializer},
        responses={200: s.LoginResponseSerializer, **errors(400),
                   429: OpenApiResponse(ErrorSerializer, description="TooManyRequestsError: too many failed "
                                        "logins for this user name or address; see Retry-After")},
        examples=[
            OpenApiExample("Login", value={"username": "alice", "password": "secret", "expiration": 3600},
                           request_only=True),
            OpenApiExample("Token", value={"user": "alice", "token": "Qm9k…", "admin": False}, response_only=True),
            OpenApiExample("Wrong password", value={"code": "IncorrectPasswordError",
                           "message": "Username or password is incorrect."}, response_only=True, status_codes=["400"]),
        ],
    )
    def post(self, request):
        serializer = s.LoginSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        wait = lockout.retry_after(data["username"], request)
        if wait:
            raise Throttled(wait=wait, detail=lockout.message(wait))
        user = authenticate(request, username=data["username"], password=data["password"])
        if user is None:
            raise IncorrectPasswordError("Username or password is incorrect.")
        lockout.register_success(user, request)
        _, token = services.issue_login_token(user, data.get("expiration"))
        return Response({"user": user.username, "token": token, "admin": is_platform_admin(user)})


class BasicLogoutView(ApiView):
    @extend_schema(
        tags=["authn"],
        operation_id="basicLogout",
        summary="Log out: revoke the token presented (or end the browser session).",
        request=None,
        responses={200: MessageSerializer, **errors(401)},
        examples=[OpenApiExample("Done", value={"message": "Logout successfully"}, response_only=True)],
    )
    def delete(self, request):
        if isinstance(request.auth, ApiToken):
            services.revoke_token(request.user, request.auth)
        else:
            logout(request)
        return Response(message("Logout successfully"))


# --- Tokens ---------------------------------------------------------------------------
class TokenListView(ApiView):
    permission_classes = [IsAuthenticated, NotApplicationToken]

    @extend_schema(
        tags=["token"],
        operation_id="getTokens",
        summary="Your live tokens.",
        description="pai stores only digests of tokens, so it lists identifiers (a token's first characters) "
        "instead of the tokens themselves; DELETE /api/v2/tokens/{token} accepts either.",
        responses={200: s.TokenListSerializer, **errors(401, 403)},
        examples=[OpenApiExample("Two tokens", response_only=True, value={
            "tokens": ["kP3x9QzW1bYt", "Zr8mN2aLq0Vc"],
            "details": [
                {"token": "kP3x9QzW1bYt", "application": False, "createdTime": 1764670000000,
                 "expirationTime": 1765274800000},
                {"token": "Zr8mN2aLq0Vc", "application": True, "createdTime": 1764600000000,
                 "expirationTime": None},
            ]})],
    )
    def get(self, request):
        rows = ApiToken.objects.live().filter(user=request.user)
        details = [
            {
                "token": row.prefix,
                "application": row.application,
                "createdTime": _epoch_ms(row.created_at),
                "expirationTime": _epoch_ms(row.expires_at),
            }
            for row in rows
        ]
        return Response({"tokens": [d["token"] for d in details], "details": details})


class TokenDetailView(ApiView):
    permission_classes = [IsAuthenticated, NotApplicationToken]

    @extend_schema(
        tags=["token"],
        operation_id="deleteToken",
        summary="Revoke one of your tokens, named by the token itself or by its identifier.",
        responses={200: MessageSerializer, **errors(401, 403, 404)},
        examples=[OpenApiExample("Revoked", value={"message": "revoke successfully"}, response_only=True)],
    )
    def delete(self, request, token):
        mine = ApiToken.objects.filter(user=request.user)
        row = mine.filter(digest=digest_of(token)).first()
        if row is None and len(token) == ApiToken.PREFIX_LENGTH:
            row = mine.filter(prefix=token).first()
        if row is None:
            raise NotFoundError("Token is not found.")
        services.revoke_token(request.user, row)
        return Response(message("revoke successfully"))


class ApplicationTokenView(ApiView):
    permission_classes = [IsAuthenticated, NotApplicationToken]

    @extend_schema(
        tags=["token"],
        operation_id="createApplicationToken",
        summary="Create an application token: no expiry, revocable.",
        request=None,
        responses={200: s.ApplicationTokenSerializer, **errors(401, 403)},
        examples=[OpenApiExample("Token", value={"token": "Zr8mN2aLq0Vc…", "application": True}, response_only=True)],
    )
    def post(self, request):
        _, token = services.issue_application_token(request.user)
        return Response({"token": token, "application": True})


# --- Users ----------------------------------------------------------------------------
def _visible_user(actor, username):
    user = users_visible_to(actor).filter(username=username).first()
    if user is None:
        raise NoUserError(f"User {username} is not found.")
    return user


def _manageable_user(actor, username):
    user = _visible_user(actor, username)
    if not users_manageable_by(actor).filter(pk=user.pk).exists():
        if is_platform_admin(user):
            raise RemoveAdminError("Only platform admins may change a platform admin.")
        raise ForbiddenError("Non-admin is not allowed to do this operation.")
    return user


def _require_user_admin(actor):
    """Platform admins and tenant admins manage accounts and groups; members get 403."""
    if not (is_platform_admin(actor) or admin_tenant_ids(actor)):
        raise ForbiddenError("Non-admin is not allowed to do this operation.")


def _virtual_clusters(actor, names):
    """The named VCs the actor may hand out: any for platform admins, their teams' for tenant admins."""
    names = list(dict.fromkeys(names))
    found = {vc.name: vc for vc in VirtualCluster.objects.manageable_by(actor).filter(name__in=names)}
    missing = [n for n in names if n not in found]
    if missing:
        raise NoVirtualClusterError(
            f"Virtual cluster {', '.join(missing)} is not found.", status_code=status.HTTP_400_BAD_REQUEST
        )
    return [found[n] for n in names]


USER_EXAMPLE = {
    "username": "alice",
    "grouplist": ["default", "team_a"],
    "email": "alice@example.com",
    "extension": {},
    "admin": False,
    "virtualCluster": ["team_a"],
    "storageConfig": ["team-a-data"],
}


class UserListView(ApiView):
    conflict_error = ConflictUserError

    def get_permissions(self):
        if self.request.method == "GET":
            return [IsAuthenticated()]
        return [IsAuthenticated(), BasicModeOnly(), NotApplicationToken()]

    @extend_schema(
        tags=["user"],
        operation_id="getAllUser",
        parameters=PAGE_PARAMETERS,
        summary="Users you can see.",
        description="OpenPAI lists every user to everyone; pai lists all accounts to platform admins, the "
        "accounts of their teams' members to tenant admins, and only your own account to anyone else.",
        responses={200: s.UserInfoSerializer(many=True), **errors(401)},
        examples=[OpenApiExample("Users", value=[USER_EXAMPLE], response_only=True)],
    )
    def get(self, request):
        users, headers = openpai_page(request, s.users_for_presenting(users_visible_to(request.user)))
        return Response(s.present_users(users), headers=headers)

    @extend_schema(
        tags=["user"],
        operation_id="createUser",
        summary="Create a user (basic mode; platform admins, or tenant admins into their team's VCs).",
        description="`virtualCluster` names VCs; the user joins each VC's same-named group and becomes a "
        "member of the VC's team. A tenant admin who names no VC adds the user to the one team they "
        "administer. Only platform admins may create admins.",
        request=s.UserCreateSerializer,
        responses={201: MessageSerializer, **errors(400, 401, 403, 409)},
        examples=[
            OpenApiExample("New user", request_only=True, value={
                "username": "alice", "password": "a-long-passphrase", "email": "alice@example.com",
                "admin": False, "virtualCluster": ["team_a"], "extension": {}}),
            OpenApiExample("Created", value={"message": "User is created successfully"}, response_only=True),
            OpenApiExample("Exists", value={"code": "ConflictUserError", "message": "User name alice is taken."},
                           response_only=True, status_codes=["409"]),
        ],
    )
    def post(self, request):
        actor = request.user
        _require_user_admin(actor)
        serializer = s.UserCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        if data["admin"] and not is_platform_admin(actor):
            raise ForbiddenError("Only platform admins may create admins.")
        vcs = _virtual_clusters(actor, data["virtualCluster"])
        tenants = []
        if not vcs and not is_platform_admin(actor):
            administered = list(Tenant.objects.filter(pk__in=admin_tenant_ids(actor)))
            if len(administered) != 1:
                raise ApiError("virtualCluster: name at least one VC of the team the user joins.")
            tenants = administered
        try:
            services.create_user(
                actor,
                username=data["username"],
                password=data["password"],
                email=data["email"],
                admin=data["admin"],
                virtual_clusters=vcs,
                extension=data["extension"],
                tenants=tenants,
            )
        except IntegrityError:
            raise ConflictUserError(f"User name {data['username']} {usernames.TAKEN}.") from None
        return Response(message("User is created successfully"), status=status.HTTP_201_CREATED)

    @extend_schema(
        tags=["user"],
        operation_id="updateUser",
        summary="Update a user (basic mode; admins of the account).",
        description="With `patch: false` every field of `data` is required and replaces the stored value; "
        "with `patch: true` only the fields given change. `virtualCluster` replaces the user's VC groups and "
        "leaves other groups alone; a new password revokes all the user's tokens, login and application.",
        request=s.UserUpdateSerializer,
        responses={201: MessageSerializer, **errors(400, 401, 403, 404)},
        examples=[
            OpenApiExample("Patch e-mail", request_only=True,
                           value={"data": {"username": "alice", "email": "new@example.com"}, "patch": True}),
            OpenApiExample("Updated", value={"message": "Update user alice successfully."}, response_only=True),
        ],
    )
    def put(self, request):
        user = _update_user(request.user, request.data)
        return Response(message(f"Update user {user.username} successfully."), status=status.HTTP_201_CREATED)


def _update_user(actor, body):
    """`PUT /users`'s update of another account by its admins; returns the user."""
    _require_user_admin(actor)
    serializer = s.UserUpdateSerializer(data=body)
    serializer.is_valid(raise_exception=True)
    data = serializer.validated_data["data"]
    user = _manageable_user(actor, data["username"])
    changes = {}
    if "admin" in data:
        if data["admin"] != is_platform_admin(user) and not is_platform_admin(actor):
            raise ForbiddenError("Only platform admins may grant or remove admin rights.")
        changes["admin"] = data["admin"]
    if "virtualCluster" in data:
        changes["virtual_clusters"] = _virtual_clusters(actor, data["virtualCluster"])
        if not is_platform_admin(actor):
            changes["kept_groups"] = Group.objects.exclude(pk__in=Group.objects.manageable_by(actor).values("pk"))
    for field, arg in (("email", "email"), ("password", "password"), ("extension", "extension")):
        if field in data:
            changes[arg] = data[field]
    services.update_user(actor, user, **changes)
    return user


class MeView(ApiView):
    def get_permissions(self):
        if self.request.method == "GET":
            return [IsAuthenticated()]
        return [IsAuthenticated(), BasicModeOnly(), NotApplicationToken()]

    @extend_schema(
        tags=["user"],
        operation_id="getUserSelf",
        summary="Your own account.",
        responses={200: s.UserInfoSerializer, **errors(401)},
        examples=[OpenApiExample("Me", value=USER_EXAMPLE, response_only=True)],
    )
    def get(self, request):
        users = s.users_for_presenting(users_visible_to(request.user).filter(pk=request.user.pk))
        return Response(s.present_users(users)[0])

    @extend_schema(
        tags=["user"],
        operation_id="updateUserSelf",
        summary="Change your own e-mail or password (basic mode).",
        description="`oldPassword` is required with `newPassword`. A new password revokes all your tokens, "
        "login and application (the one this request presents too): log in again.",
        request=s.MeUpdateSerializer,
        responses={201: MessageSerializer, **errors(400, 401, 403)},
        examples=[OpenApiExample("New password", request_only=True, value={
            "data": {"username": "alice", "oldPassword": "old-passphrase", "newPassword": "new-passphrase"},
            "patch": True}),
            OpenApiExample("Updated", value={"message": "Update user alice successfully."}, response_only=True)],
    )
    def put(self, request):
        _update_own_profile(request.user, request.data)
        return Response(message(f"Update user {request.user.username} successfully."), status=status.HTTP_201_CREATED)


def _update_own_profile(actor, body):
    """`PUT /users/me`: your own e-mail, or your password given the old one."""
    serializer = s.MeUpdateSerializer(data=body)
    serializer.is_valid(raise_exception=True)
    data = serializer.validated_data["data"]
    if data["username"] != actor.username:
        raise ForbiddenError("data.username: you may only update your own account here.")
    changes = {}
    if "email" in data:
        changes["email"] = data["email"]
    if "newPassword" in data:
        changes["new_password"] = data["newPassword"]
        changes["old_password"] = data.get("oldPassword")
    services.change_own_profile(actor, **changes)


class UserDetailView(ApiView):
    def get_permissions(self):
        if self.request.method == "GET":
            return [IsAuthenticated()]
        return [IsAuthenticated(), BasicModeOnly(), NotApplicationToken()]

    @extend_schema(
        tags=["user"],
        operation_id="getUser",
        summary="A user's account (if you can see it).",
        responses={200: s.UserInfoSerializer, **errors(401, 404)},
        examples=[OpenApiExample("User", value=USER_EXAMPLE, response_only=True)],
    )
    def get(self, request, username):
        user = _visible_user(request.user, username)
        return Response(s.present_users(s.users_for_presenting(users_visible_to(request.user).filter(pk=user.pk)))[0])

    @extend_schema(
        tags=["user"],
        operation_id="deleteUser",
        summary="Delete a user (basic mode; admins of the account; never a platform admin).",
        responses={200: MessageSerializer, **errors(400, 401, 403, 404, 409)},
        examples=[OpenApiExample("Deleted", value={"message": "user is removed successfully"}, response_only=True)],
    )
    def delete(self, request, username):
        user = _manageable_user(request.user, username)
        if is_platform_admin(user):
            raise RemoveAdminError("A platform admin cannot be removed; remove their admin rights first.")
        try:
            services.delete_user(request.user, user)
        except ProtectedError:
            raise ConflictUserError(
                f"User {username} still owns jobs or other records; deactivate it instead."
            ) from None
        return Response(message("user is removed successfully"))


def _groups_by_name(actor, names):
    """Named groups the actor may hand out: 404 for unknown or invisible ones, 403 for others' groups."""
    names = list(dict.fromkeys(names))
    visible = {g.name: g for g in Group.objects.visible_to(actor).filter(name__in=names)}
    missing = [n for n in names if n not in visible]
    if missing:
        raise NoGroupError(f"Group {', '.join(missing)} is not found.")
    manageable = set(Group.objects.manageable_by(actor).filter(name__in=names).values_list("name", flat=True))
    forbidden = [n for n in names if n not in manageable and n != DEFAULT_GROUP]
    if forbidden:
        raise ForbiddenError(f"You may not manage group {', '.join(forbidden)}.")
    return [visible[n] for n in names]


class UserGroupView(ApiView):
    permission_classes = [IsAuthenticated, BasicModeOnly, NotApplicationToken]

    @extend_schema(
        tags=["user"],
        operation_id="updateUserGroup",
        summary="Add a group to a user's grouplist (basic mode; admins of the account and the group).",
        request=s.GroupNameSerializer,
        responses={201: MessageSerializer, **errors(400, 401, 403, 404)},
        examples=[OpenApiExample("Add", value={"groupname": "team_a"}, request_only=True),
                  OpenApiExample("Added", value={"message": "User alice is added into group team_a"},
                                 response_only=True)],
    )
    def put(self, request, username):
        user, group = self._resolve(request, username)
        services.add_user_to_group(request.user, user, group)
        return Response(message(f"User {username} is added into group {group.name}"), status=status.HTTP_201_CREATED)

    @extend_schema(
        tags=["user"],
        operation_id="deleteUserGroup",
        summary="Remove a group from a user's grouplist (basic mode).",
        request=s.GroupNameSerializer,
        responses={201: MessageSerializer, **errors(400, 401, 403, 404)},
        examples=[OpenApiExample("Remove", value={"groupname": "team_a"}, request_only=True),
                  OpenApiExample("Removed", value={"message": "User alice is removed from group team_a"},
                                 response_only=True)],
    )
    def delete(self, request, username):
        user, group = self._resolve(request, username)
        services.remove_user_from_group(request.user, user, group)
        return Response(message(f"User {username} is removed from group {group.name}"), status=status.HTTP_201_CREATED)

    def _resolve(self, request, username):
        _require_user_admin(request.user)
        serializer = s.GroupNameSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        user = _manageable_user(request.user, username)
        (group,) = _groups_by_name(request.user, [serializer.validated_data["groupname"]])
        if group.name == ADMIN_GROUP and not is_platform_admin(request.user):
            raise ForbiddenError("Only platform admins may grant or remove admin rights.")
        return user, group


class UserGroupListView(ApiView):
    permission_classes = [IsAuthenticated, BasicModeOnly, NotApplicationToken]

    @extend_schema(
        tags=["user"],
        operation_id="updateUserGrouplist",
        summary="Replace a user's grouplist (basic mode).",
        description="The `default` group always stays. A tenant admin replaces only the groups they manage; "
        "the user's groups in other teams stay as they are.",
        request=s.GroupListSerializer,
        responses={201: MessageSerializer, **errors(400, 401, 403, 404)},
        examples=[OpenApiExample("Replace", value={"grouplist": ["default", "team_a"]}, request_only=True),
                  OpenApiExample("Replaced", value={"message": "update user grouplist successfully."},
                                 response_only=True)],
    )
    def put(self, request, username):
        actor = request.user
        _require_user_admin(actor)
        serializer = s.GroupListSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        user = _manageable_user(actor, username)
        groups = _groups_by_name(actor, serializer.validated_data["grouplist"])
        keep = []
        if not is_platform_admin(actor):
            manageable = Group.objects.manageable_by(actor).values("pk")
            keep = list(Group.objects.filter(user=user).exclude(pk__in=manageable))
        services.set_user_groups(actor, user, groups, keep=keep)
        return Response(message("update user grouplist successfully."), status=status.HTTP_201_CREATED)


class LegacyUserFieldView(ApiView):
    """OpenPAI's older `PUT /api/v2/user/{user}/<field>` routes (before `/users`), answered as the
    v2 routes answer: your own password (with the old one) and e-mail as `PUT /users/me`, any
    other change as `PUT /users` by the account's admins."""

    permission_classes = [IsAuthenticated, BasicModeOnly, NotApplicationToken]
    # route field: (the legacy body's key, the v2 update's key)
    FIELDS = {
        "password": ("newPassword", "password"),
        "email": ("email", "email"),
        "admin": ("admin", "admin"),
        "virtualcluster": ("virtualCluster", "virtualCluster"),
        "extension": ("extension", "extension"),
    }
    field = None

    @extend_schema(
        tags=["user"],
        operation_id="updateUserField",
        summary="Change one field of a user: {newPassword, oldPassword}, {email}, {admin}, {virtualCluster} or "
        "{extension} by the route's last segment (basic mode).",
        request={"application/json": {"type": "object"}},
        responses={201: MessageSerializer, **errors(400, 401, 403, 404)},
        examples=[OpenApiExample("E-mail", value={"email": "alice@example.com"}, request_only=True),
                  OpenApiExample("Updated", value={"message": "Update user alice email successfully."},
                                 response_only=True)],
    )
    def put(self, request, username):
        body = request.data if isinstance(request.data, dict) else {}
        key, update_key = self.FIELDS[self.field]
        own = username == request.user.username and self.field in ("password", "email")
        if not own:
            _require_user_admin(request.user)
        if key not in body:
            raise ApiError(f"{key}: is required.")
        if own:
            data = {"username": username, key: body[key]}
            if self.field == "password" and "oldPassword" in body:
                data["oldPassword"] = body["oldPassword"]
            _update_own_profile(request.user, {"data": data, "patch": True})
        else:
            _update_user(request.user, {"data": {"username": username, update_key: body[key]}, "patch": True})
        return Response(message(f"Update user {username} {self.field} successfully."), status=status.HTTP_201_CREATED)


# --- Groups ---------------------------------------------------------------------------
GROUP_EXAMPLE = {
    "groupname": "team_a",
    "description": "Team A's researchers",
    "externalName": "",
    "extension": {"acls": {"admin": False, "virtualClusters": ["team_a"], "storageConfigs": ["team-a-data"]}},
    "tenant": "team-a",
}


def _visible_group(actor, name):
    group = s.groups_for_presenting(Group.objects.visible_to(actor)).filter(name=name).first()
    if group is None:
        raise NoGroupError(f"Group {name} is not found.")
    return group


def _manageable_group(actor, name):
    group = _visible_group(actor, name)
    if not Group.objects.manageable_by(actor).filter(pk=group.pk).exists():
        raise ForbiddenError("Non-admin is not allowed to do this operation.")
    return group


def _acl_objects(actor, acls):
    """The VCs and storages named by `extension.acls`, among those the actor manages (None: not given)."""
    vcs = storages = None
    if acls.get("admin"):
        raise ApiError("extension.acls.admin: only the built-in admingroup makes admins.")
    if "virtualClusters" in acls:
        vcs = _virtual_clusters(actor, acls["virtualClusters"])
    if "storageConfigs" in acls:
        names = list(dict.fromkeys(acls["storageConfigs"]))
        found = {st.name: st for st in StorageConfig.objects.manageable_by(actor).filter(name__in=names)}
        missing = [n for n in names if n not in found]
        if missing:
            raise ApiError(f"extension.acls.storageConfigs: storage {', '.join(missing)} is not found.")
        storages = [found[n] for n in names]
    return vcs, storages


class GroupListView(ApiView):
    conflict_error = ConflictGroupError

    def get_permissions(self):
        if self.request.method == "GET":
            return [IsAuthenticated()]
        return [IsAuthenticated(), NotApplicationToken()]

    @extend_schema(
        tags=["group"],
        operation_id="getAllGroup",
        parameters=PAGE_PARAMETERS,
        summary="Groups you can see: your teams' groups and the built-in ones (all, for platform admins).",
        responses={200: s.GroupInfoSerializer(many=True), **errors(401)},
        examples=[OpenApiExample("Groups", value=[GROUP_EXAMPLE], response_only=True)],
    )
    def get(self, request):
        groups, headers = openpai_page(request, s.groups_for_presenting(Group.objects.visible_to(request.user)))
        return Response([s.present_group(g) for g in groups], headers=headers)

    @extend_schema(
        tags=["group"],
        operation_id="createGroup",
        summary="Create a group (platform admins, or tenant admins in their team).",
        description="`extension.acls` grants the group VCs and storages of its team. `tenant` (pai extension) "
        "names the team; without it, the team of the named VCs and storages, or the only team you administer.",
        request=s.GroupCreateSerializer,
        responses={201: MessageSerializer, **errors(400, 401, 403, 409)},
        examples=[
            OpenApiExample("New group", request_only=True, value={
                "groupname": "team_a_vision", "description": "Vision researchers", "externalName": "",
                "extension": {"acls": {"virtualClusters": ["team_a"], "storageConfigs": ["team-a-data"]}}}),
            OpenApiExample("Created", value={"message": "group is created successfully"}, response_only=True),
        ],
    )
    def post(self, request):
        actor = request.user
        _require_user_admin(actor)
        serializer = s.GroupCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        acls = data.get("extension", {}).get("acls", {})
        vcs, storages = _acl_objects(actor, acls)
        tenant = self._tenant(actor, data.get("tenant"), [*(vcs or []), *(storages or [])])
        try:
            services.create_group(
                actor,
                name=data["groupname"],
                tenant=tenant,
                description=data["description"],
                external_name=data["externalName"],
                virtual_clusters=vcs or [],
                storages=storages or [],
            )
        except IntegrityError:
            raise ConflictGroupError(f"Group {data['groupname']} already exists.") from None
        return Response(message("group is created successfully"), status=status.HTTP_201_CREATED)

    @extend_schema(
        tags=["group"],
        operation_id="updateGroup",
        summary="Update a group's description, external name or grants.",
        description="With `patch: false` the grants not listed in `extension.acls` are removed; with "
        "`patch: true` only the fields given change.",
        request=s.GroupUpdateSerializer,
        responses={201: MessageSerializer, **errors(400, 401, 403, 404)},
        examples=[OpenApiExample("New description", request_only=True,
                                 value={"data": {"groupname": "team_a", "description": "Team A"}, "patch": True}),
                  OpenApiExample("Updated", value={"message": "update group team_a successfully."},
                                 response_only=True)],
    )
    def put(self, request):
        actor = request.user
        serializer = s.GroupUpdateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data, patch = serializer.validated_data["data"], serializer.validated_data["patch"]
        group = _manageable_group(actor, data["groupname"])
        acls = data.get("extension", {}).get("acls", {})
        vcs, storages = _acl_objects(actor, acls)
        if not patch and group.tenant_id is not None:
            vcs, storages = vcs or [], storages or []
        changes = {"virtual_clusters": vcs, "storages": storages}
        if "description" in data or not patch:
            changes["description"] = data.get("description", "")
        if "externalName" in data or (not patch and not group.is_builtin):
            changes["external_name"] = data.get("externalName", "")
        services.update_group(actor, group, **changes)
        return Response(message(f"update group {group.name} successfully."), status=status.HTTP_201_CREATED)

    @staticmethod
    def _tenant(actor, slug, owned):
        manageable = Tenant.objects.manageable_by(actor)
        if slug:
            tenant = manageable.filter(slug=slug).first()
            if tenant is None:
                raise ApiError(f"tenant: you administer no team {slug}.")
            return tenant
        owners = {obj.tenant_id for obj in owned}
        if len(owners) > 1:
            raise ApiError("extension.acls: name VCs and storages of one team only.")
        if owners:
            return manageable.get(pk=owners.pop())
        administered = list(Tenant.objects.filter(pk__in=admin_tenant_ids(actor))[:2])
        if len(administered) == 1:
            return administered[0]
        raise ApiError("tenant: name the team that owns the group.")


class GroupDetailView(ApiView):
    def get_permissions(self):
        if self.request.method == "GET":
            return [IsAuthenticated()]
        return [IsAuthenticated(), NotApplicationToken()]

    @extend_schema(
        tags=["group"],
        operation_id="getGroup",
        summary="A group.",
        responses={200: s.GroupInfoSerializer, **errors(401, 404)},
        examples=[OpenApiExample("Group", value=GROUP_EXAMPLE, response_only=True)],
    )
    def get(self, request, groupname):
        return Response(s.present_group(_visible_group(request.user, groupname)))

    @extend_schema(
        tags=["group"],
        operation_id="deleteGroup",
        summary="Delete a group (its admins; never a built-in group).",
        responses={201: MessageSerializer, **errors(400, 401, 403, 404)},
        examples=[OpenApiExample("Deleted", value={"message": "group is removed successfully"}, response_only=True)],
    )
    def delete(self, request, groupname):
        group = _manageable_group(request.user, groupname)
        services.delete_group(request.user, group)
        return Response(message("group is removed successfully"), status=status.HTTP_201_CREATED)


class GroupUserListView(ApiView):
    @extend_schema(
        tags=["group"],
        operation_id="getGroupMembers",
        parameters=PAGE_PARAMETERS,
        summary="Members of a group.",
        description="For a team's group, its members; for the built-in groups (which span teams), only the "
        "members whose accounts you can see.",
        responses={200: s.GroupMemberSerializer(many=True), **errors(401, 404)},
        examples=[OpenApiExample("Members", value=[{"username": "alice", "clusterAdmin": False}], response_only=True)],
    )
    def get(self, request, groupname):
        group = _visible_group(request.user, groupname)
        members = group.user_set.all()
        if group.tenant_id is None:
            members = members.filter(pk__in=users_visible_to(request.user).values("pk"))
        # A separate query: chained filters on a many-to-many manager would reuse its join.
        admins = set(
            get_user_model().objects.filter(groups__name=ADMIN_GROUP, pk__in=members.values("pk")).values_list(
                "pk", flat=True
            )
        )
        rows = members.order_by("username").values_list("pk", "username", "is_superuser")
        rows, headers = openpai_page(request, rows)
        return Response([{"username": name, "clusterAdmin": su or pk in admins} for pk, name, su in rows],
                        headers=headers)
