"""`Authorization: Bearer <token>`: OpenPAI's login and application tokens."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions

from apps.accounts.tokens import find_live_token


class BearerTokenAuthentication(authentication.BaseAuthentication):
    """Authenticates `Authorization: Bearer <token>`; `request.auth` is the token's row.

    Expiry and revocation are checked on every request against the database, so a
    revoked token stops working at once.
    """

    keyword = "bearer"

    def authenticate(self, request):
        parts = authentication.get_authorization_header(request).split()
        if not parts or parts[0].lower() != self.keyword.encode():
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed("The Authorization header must be 'Bearer <token>'.")
        try:
            token = parts[1].decode()
        except UnicodeError:
            raise exceptions.AuthenticationFailed("The token is not valid.") from None
        row = find_live_token(token)
        if row is None or not row.user.is_active:
            raise exceptions.AuthenticationFailed("The token is invalid, expired or revoked.")
        return row.user, row

    def authenticate_header(self, request):
        return 'Bearer realm="api"'


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = BearerTokenAuthentication
    name = "bearerAuth"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "A token from POST /api/v2/authn/basic/login "
                "or POST /api/v2/tokens/application."}
