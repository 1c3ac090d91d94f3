"""OpenPAI deployments served the REST API under `/rest-server`; its clients (the JS SDK and
CLI store `<host>/rest-server` as the REST base) keep calling those paths."""

REST_SERVER_PREFIX = "/rest-server"


class RestServerPrefixMiddleware:
    """Serve `/rest-server/api/...` as `/api/...`: the same views, no second set of routes."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.path_info.startswith(REST_SERVER_PREFIX + "/api/"):
            request.path_info = request.path_info[len(REST_SERVER_PREFIX):]
        return self.get_response(request)
