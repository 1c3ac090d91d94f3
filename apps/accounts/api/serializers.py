"""OpenPAI's shapes for tokens, users and groups: input validation and the objects returned.

Responses are built in bulk by `present_users` / `present_groups` (a fixed number of
queries for any number of rows); the response serializers below describe them in the
OpenAPI schema.
"""

from django.contrib.auth import get_user_model
from django.core.validators import RegexValidator
from django.db.models import Prefetch
from rest_framework import serializers

from apps.storage.models import StorageGrant
from apps.virtualclusters.models import VirtualCluster, VirtualClusterGrant

from ..models import Group
from ..roles import ADMIN_GROUP

username_validator = RegexValidator(r"^[\w.-]+$", "Use letters, digits, '_', '.' and '-'.")
groupname_validator = RegexValidator(r"^[\w.-]+$", "Use letters, digits, '_', '.' and '-'.")


def _names(max_length=64, **kwargs):
    return serializers.ListField(child=serializers.CharField(max_length=max_length), max_length=1000, **kwargs)


# --- Authentication and tokens --------------------------------------------------------
class LoginSerializer(serializers.Serializer):
    username = serializers.CharField(max_length=150)
    password = serializers.CharField(max_length=4096, trim_whitespace=False)
    expiration = serializers.IntegerField(
        required=False, min_value=1, help_text="Seconds the token stays valid (default 7 days); at most "
        "`PAI_LOGIN_TOKEN_MAX_SECONDS` (7 days unless the platform says otherwise): a longer expiration is "
        "shortened to it."
    )


class LoginResponseSerializer(serializers.Serializer):
    user = serializers.CharField()
    token = serializers.CharField()
    admin = serializers.BooleanField()


class TokenDetailSerializer(serializers.Serializer):
    token = serializers.CharField(help_text="The token's identifier (its first characters); never the secret.")
    application = serializers.BooleanField()
    createdTime = serializers.IntegerField(help_text="Epoch milliseconds.")
    expirationTime = serializers.IntegerField(allow_null=True, help_text="Epoch milliseconds; null: never.")


class TokenListSerializer(serializers.Serializer):
    tokens = serializers.ListField(
        child=serializers.CharField(),
        help_text="Identifiers of your live tokens, accepted by DELETE /api/v2/tokens/{token}. OpenPAI "
        "returned the tokens themselves; pai stores only digests and cannot.",
    )
    details = TokenDetailSerializer(many=True, help_text="pai extension: kind and lifetime of each token.")


class ApplicationTokenSerializer(serializers.Serializer):
    token = serializers.CharField()
    application = serializers.BooleanField()


# --- Users ----------------------------------------------------------------------------
class UserCreateSerializer(serializers.Serializer):
    username = serializers.CharField(max_length=150, validators=[username_validator])
    password = serializers.CharField(max_length=4096, trim_whitespace=False)
    admin = serializers.BooleanField(default=False)
    email = serializers.EmailField(default="", allow_blank=True)
    virtualCluster = _names(default=list)
    extension = serializers.DictField(default=dict)


class UserUpdateDataSerializer(serializers.Serializer):
    username = serializers.CharField(max_length=150)
    email = serializers.EmailField(allow_blank=True, required=False)
    virtualCluster = _names(required=False)
    admin = serializers.BooleanField(required=False)
    password = serializers.CharField(max_length=4096, trim_whitespace=False, required=False)
    extension = serializers.DictField(required=False)


class UserUpdateSerializer(serializers.Serializer):
    data = UserUpdateDataSerializer(help_text="With patch false every field is required.")
    patch = serializers.BooleanField(default=False)

    def validate(self, attrs):
        return _require_all_unless_patch(attrs, ("email", "virtualCluster", "admin", "password", "extension"))


class MeUpdateDataSerializer(serializers.Serializer):
    username = serializers.CharField(max_length=150)
    email = serializers.EmailField(allow_blank=True, required=False)
    newPassword = serializers.CharField(max_length=4096, trim_whitespace=False, required=False)
    oldPassword = serializers.CharField(max_length=4096, trim_whitespace=False, required=False)


class MeUpdateSerializer(serializers.Serializer):
    data = MeUpdateDataSerializer()
    patch = serializers.BooleanField(default=False)

    def validate(self, attrs):
        return _require_all_unless_patch(attrs, ("email", "newPassword"))


def _require_all_unless_patch(attrs, names):
    # With patch=false OpenPAI replaces the whole object, so every field must be given.
    if not attrs["patch"]:
        missing = [name for name in names if name not in attrs["data"]]
        if missing:
            raise serializers.ValidationError({"data": {name: "Required unless patch is true." for name in missing}})
    return attrs


class GroupNameSerializer(serializers.Serializer):
    groupname = serializers.CharField(max_length=150)


class GroupListSerializer(serializers.Serializer):
    grouplist = _names(150)


class UserInfoSerializer(serializers.Serializer):
    username = serializers.CharField()
    grouplist = serializers.ListField(child=serializers.CharField())
    email = serializers.CharField()
    extension = serializers.DictField()
    admin = serializers.BooleanField()
    virtualCluster = serializers.ListField(child=serializers.CharField(), help_text="VCs the user may submit to.")
    storageConfig = serializers.ListField(child=serializers.CharField(), help_text="Storages granted to the user.")


def present_users(users):
    """OpenPAI user objects for `users`, in a fixed number of queries whatever their number."""
    users = list(users)
    through = get_user_model().groups.through
    pairs = list(
        through.objects.filter(user_id__in=[u.pk for u in users])
        .order_by("group__name")
        .values_list("user_id", "group_id", "group__name")
    )
    groups = {g.pk: g for g in _groups_with_grants(Group.objects.filter(pk__in={gid for _, gid, _ in pairs}))}
    names_by_user, groups_by_user = {}, {}
    for user_id, group_id, name in pairs:
        names_by_user.setdefault(user_id, []).append(name)
        if group_id in groups:
            groups_by_user.setdefault(user_id, []).append(groups[group_id])
    all_vcs = None
    result = []
    for user in users:
        grouplist = names_by_user.get(user.pk, [])
        admin = user.is_superuser or ADMIN_GROUP in grouplist
        own = groups_by_user.get(user.pk, [])
        if admin:
            if all_vcs is None:
                all_vcs = list(VirtualCluster.objects.order_by("name").values_list("name", flat=True))
            vcs = all_vcs
        else:
            vcs = sorted({grant.virtual_cluster.name for g in own for grant in g.vc_grants.all()})
        profile = getattr(user, "pai_profile", None)
        result.append(
            {
                "username": user.username,
                "grouplist": grouplist,
                "email": user.email,
                "extension": profile.extension if profile else {},
                "admin": admin,
                "virtualCluster": vcs,
                "storageConfig": sorted({grant.storage.name for g in own for grant in g.storage_grants.all()}),
            }
        )
    return result


def users_for_presenting(queryset):
    return queryset.select_related("pai_profile").order_by("username")


# --- Groups ---------------------------------------------------------------------------
class AclsSerializer(serializers.Serializer):
    admin = serializers.BooleanField(required=False, help_text="True only for the built-in admingroup.")
    virtualClusters = _names(required=False)
    storageConfigs = _names(63, required=False)


class GroupExtensionSerializer(serializers.Serializer):
    acls = AclsSerializer(required=False)

    def to_internal_value(self, data):
        if isinstance(data, dict):
            unknown = sorted(set(data) - {"acls"})
            if unknown:
                message = "pai keeps only 'acls' in a group's extension."
                raise serializers.ValidationError({key: message for key in unknown})
        return super().to_internal_value(data)


class GroupCreateSerializer(serializers.Serializer):
    groupname = serializers.CharField(max_length=150, validators=[groupname_validator])
    description = serializers.CharField(default="", allow_blank=True, max_length=10000)
    externalName = serializers.CharField(default="", allow_blank=True, max_length=255)
    extension = GroupExtensionSerializer(required=False)
    tenant = serializers.SlugField(
        required=False,
        help_text="pai extension: the team owning the group (default: the team of its VCs and storages, "
        "or the only team you administer).",
    )


class GroupUpdateDataSerializer(serializers.Serializer):
    groupname = serializers.CharField(max_length=150)
    description = serializers.CharField(allow_blank=True, max_length=10000, required=False)
    externalName = serializers.CharField(allow_blank=True, max_length=255, required=False)
    extension = GroupExtensionSerializer(required=False)
    tenant = serializers.CharField(required=False, allow_null=True, help_text="Ignored: a group stays in its team.")


class GroupUpdateSerializer(serializers.Serializer):
    data = GroupUpdateDataSerializer()
    patch = serializers.BooleanField(default=False)


class AclsOutSerializer(serializers.Serializer):
    admin = serializers.BooleanField()
    virtualClusters = serializers.ListField(child=serializers.CharField())
    storageConfigs = serializers.ListField(child=serializers.CharField())


class GroupExtensionOutSerializer(serializers.Serializer):
    acls = AclsOutSerializer()


class GroupInfoSerializer(serializers.Serializer):
    groupname = serializers.CharField()
    description = serializers.CharField()
    externalName = serializers.CharField()
    extension = GroupExtensionOutSerializer()
    tenant = serializers.CharField(allow_null=True, help_text="pai extension: the team's slug; null for built-ins.")


class GroupMemberSerializer(serializers.Serializer):
    username = serializers.CharField()
    clusterAdmin = serializers.BooleanField()


def _groups_with_grants(queryset):
    return queryset.select_related("tenant").prefetch_related(
        Prefetch("vc_grants", queryset=VirtualClusterGrant.objects.select_related("virtual_cluster")),
        Prefetch("storage_grants", queryset=StorageGrant.objects.select_related("storage")),
    )


def groups_for_presenting(queryset):
    return _groups_with_grants(queryset).order_by("name")


def present_group(group):
    return {
        "groupname": group.name,
        "description": group.description,
        "externalName": group.external_name,
        "extension": {
            "acls": {
                "admin": group.name == ADMIN_GROUP,
                "virtualClusters": sorted(g.virtual_cluster.name for g in group.vc_grants.all()),
                "storageConfigs": sorted(g.storage.name for g in group.storage_grants.all()),
            }
        },
        "tenant": group.tenant.slug if group.tenant_id else None,
    }
