"""OIDC mode (`PAI_AUTH_MODE=oidc`): who a user is comes from the identity provider.

mozilla-django-oidc runs the authorization-code flow and verifies the ID token's
signature against the provider's JWKS; this backend decides what pai makes of the
verified claims:
- the user is found, or created at first login, by the username claim
  (`PAI_OIDC_USERNAME_CLAIM`); the e-mail follows `PAI_OIDC_EMAIL_CLAIM` at every login;
- at every login the groups named by `PAI_OIDC_GROUPS_CLAIM` are mirrored onto the pai
  groups whose `external_name` matches: added and removed. Groups without an external
  name (the built-in `default` among them) are never touched;
- a user whose claim names no group pai knows is refused: not created, or, if the account
  exists, left without its mirrored groups. The refusal is marked on the request, so that
  the callback view can say why instead of failing silently.
"""

import logging
from urllib.parse import urlencode

import jwt
import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import SuspiciousOperation, ValidationError
from django.core.validators import validate_email
from django.db import transaction
from django.shortcuts import resolve_url
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from apps.audit.services import record

from . import roles, usernames
from .models import Group

logger = logging.getLogger(__name__)

# Set on the request when the provider vouched for the user but pai refuses them.
REFUSED_NO_GROUP = "no_group"
REFUSED_NAME_TAKEN = "name_taken"


def claim_group_names(claims):
    """The group names in the groups claim: a list of strings, or one string from some providers."""
    value = claims.get(settings.PAI_OIDC_GROUPS_CLAIM)
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)):
        return set()
    return {name for name in value if isinstance(name, str) and name}


def mirrorable_groups():
    """Groups the provider's claim decides: those with an external name, never `default`."""
    return Group.objects.exclude(external_name="").exclude(name=roles.DEFAULT_GROUP)


def mirrored_groups(names):
    """pai's groups that mirror the named external groups."""
    if not names:
        return Group.objects.none()
    return mirrorable_groups().filter(external_name__in=names)


@transaction.atomic
def sync_groups(user, groups):
    """Make the user's mirrored groups exactly `groups`; their other groups stay as they are.

    Joining a team's group makes the user a member of the team. Losing the last group of
    a team through this sync ends a plain membership of that team; team admins keep
    theirs, as the admin role is given by hand. Returns (added, removed) group names.
    """
    from apps.tenants.models import Membership

    wanted = {g.pk: g for g in groups}
    current = {g.pk: g for g in mirrorable_groups().filter(user=user)}
    added = [g for pk, g in wanted.items() if pk not in current]
    removed = [g for pk, g in current.items() if pk not in wanted]
    user.groups.remove(*removed)
    user.groups.add(*added)
    for tenant_id in sorted({g.tenant_id for g in added if g.tenant_id}):
        membership, created = Membership.objects.get_or_create(tenant_id=tenant_id, user=user)
        if created:
            record(None, "membership.create", membership, changes={"role": membership.role, "source": "oidc"})
    lost_tenants = {g.tenant_id for g in removed if g.tenant_id}
    still_held = set(Group.objects.filter(user=user, tenant_id__in=lost_tenants).values_list("tenant_id", flat=True))
    for membership in Membership.objects.filter(
        user=user, tenant_id__in=lost_tenants - still_held, role=Membership.Role.MEMBER
    ):
        record(None, "membership.delete", membership, changes={"role": membership.role, "source": "oidc"})
        membership.delete()
    roles.forget(user)
    added_names, removed_names = sorted(g.name for g in added), sorted(g.name for g in removed)
    if added_names or removed_names:
        record(None, "user.oidc_sync_groups", user, changes={"added": added_names, "removed": removed_names})
    return added_names, removed_names


class PaiOIDCBackend(OIDCAuthenticationBackend):
    """mozilla-django-oidc's backend with pai's rules for users and groups (see the module docstring)."""

    def authenticate(self, request, **kwargs):
        try:
            return super().authenticate(request, **kwargs)
        except requests.RequestException as exc:
            # A code the provider refuses (expired, replayed, for another client) or a
            # provider that does not answer: the login fails, pai does not.
            logger.warning("OIDC login failed at the provider: %s", exc.__class__.__name__)
            return None

    def get_userinfo(self, access_token, id_token, payload):
        # Some providers (Azure AD among them) put the groups only in the ID token, others
        # only behind the userinfo endpoint: pai reads both, the verified ID token's
        # claims first. Both must describe the same subject.
        userinfo = super().get_userinfo(access_token, id_token, payload)
        if "sub" in userinfo and userinfo["sub"] != payload.get("sub"):
            raise SuspiciousOperation("The userinfo subject differs from the ID token's.")
        return {**payload, **userinfo}

    def retrieve_matching_jwk(self, token):
        if "kid" in jwt.get_unverified_header(token):
            return super().retrieve_matching_jwk(token)
        # mozilla-django-oidc needs a `kid`; OIDC Core (10.1) lets a provider leave it out
        # when its JWKS holds one signing key. Then that key, and only it, must verify.
        response = requests.get(
            self.OIDC_OP_JWKS_ENDPOINT,
            verify=self.get_settings("OIDC_VERIFY_SSL", True),
            timeout=self.get_settings("OIDC_TIMEOUT", None),
            proxies=self.get_settings("OIDC_PROXY", None),
        )
        response.raise_for_status()
        algorithm = self.OIDC_RP_SIGN_ALGO
        signing = [
            key
            for key in response.json().get("keys", [])
            if key.get("use", "sig") == "sig" and key.get("alg", algorithm) == algorithm
        ]
        if len(signing) != 1:
            raise SuspiciousOperation("The ID token names no key and the provider publishes several.")
        return jwt.PyJWK(signing[0], algorithm=algorithm)

    def verify_token(self, token, **kwargs):
        payload = super().verify_token(token, **kwargs)
        # mozilla-django-oidc leaves the audience unchecked: a token minted for another
        # client of the same provider must not log anyone into pai.
        audience = payload.get("aud")
        audiences = [audience] if isinstance(audience, str) else list(audience or [])
        if self.OIDC_RP_CLIENT_ID not in audiences:
            raise SuspiciousOperation("The ID token was not issued to pai.")
        return payload

    def verify_claims(self, claims):
        username = claims.get(settings.PAI_OIDC_USERNAME_CLAIM)
        if not isinstance(username, str) or not username:
            return False
        User = get_user_model()
        field = User._meta.get_field(User.USERNAME_FIELD)
        try:
            field.run_validators(username)
        except ValidationError:
            return False
        return len(username) <= field.max_length

    def filter_users_by_claims(self, claims):
        User = get_user_model()
        return User.objects.filter(**{User.USERNAME_FIELD: claims[settings.PAI_OIDC_USERNAME_CLAIM]})

    def get_or_create_user(self, access_token, id_token, payload):
        claims = self.get_userinfo(access_token, id_token, payload)
        if not self.verify_claims(claims):
            raise SuspiciousOperation(
                f"The claim {settings.PAI_OIDC_USERNAME_CLAIM} is missing or not a valid user name."
            )
        groups = list(mirrored_groups(claim_group_names(claims)))
        with transaction.atomic():
            user = self.filter_users_by_claims(claims).first()
            if not groups:
                if user is not None:
                    sync_groups(user, [])
                username = claims[settings.PAI_OIDC_USERNAME_CLAIM]
                logger.info("OIDC login of %s refused: in no group that pai mirrors", username)
                self.request.pai_oidc_refusal = REFUSED_NO_GROUP
                return None
            if user is None and usernames.is_taken(claims[settings.PAI_OIDC_USERNAME_CLAIM]):
                # Another account holds the name in another case: never sign in as it, nor beside it.
                logger.warning("OIDC login of %s refused: the name is taken in another case",
                               claims[settings.PAI_OIDC_USERNAME_CLAIM])
                self.request.pai_oidc_refusal = REFUSED_NAME_TAKEN
                return None
            if user is None:
                user = self.create_user(claims)
            else:
                user = self.update_user(user, claims)
            sync_groups(user, groups)
        return user

    def create_user(self, claims):
        User = get_user_model()
        user = User(**{User.USERNAME_FIELD: claims[settings.PAI_OIDC_USERNAME_CLAIM]}, email=email_of(claims))
        # The provider checks who people are; a pai password would be a second way in.
        user.set_unusable_password()
        user.save()
        record(None, "user.oidc_create", user, changes={"email": user.email})
        return user

    def update_user(self, user, claims):
        email = email_of(claims)
        if email != user.email:
            record(None, "user.oidc_update", user, changes={"email": [user.email, email]})
            user.email = email
            user.save(update_fields=["email"])
        return user


def email_of(claims):
    """The e-mail claim if it is a valid address, else empty: pai never stores a malformed one."""
    value = claims.get(settings.PAI_OIDC_EMAIL_CLAIM)
    if not isinstance(value, str):
        return ""
    try:
        validate_email(value)
    except ValidationError:
        return ""
    return value


def provider_logout_url(request, return_to=None):
    """Where to send a browser after pai's logout: the provider's end-session endpoint, if configured.

    `return_to` (an absolute URL, checked by the caller) is where the provider sends the
    browser back; by default LOGOUT_REDIRECT_URL.
    """
    return_to = return_to or request.build_absolute_uri(resolve_url(settings.LOGOUT_REDIRECT_URL or "/"))
    endpoint = getattr(settings, "OIDC_OP_LOGOUT_ENDPOINT", "")
    if not endpoint:
        return return_to
    params = {"client_id": settings.OIDC_RP_CLIENT_ID, "post_logout_redirect_uri": return_to}
    id_token = request.session.get("oidc_id_token")
    if id_token:
        params["id_token_hint"] = id_token
    return f"{endpoint}?{urlencode(params)}"
