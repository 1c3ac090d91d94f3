"""OpenPAI's job errors, as the job routes and services raise them."""

from pai.api.errors import ApiError, ConflictError, ForbiddenError, NotFoundError


class InvalidProtocolError(ApiError):
    code = "InvalidProtocolError"

    def __init__(self, errors):
        super().__init__("; ".join(errors))
        self.errors = list(errors)


class InvalidParametersError(ApiError):
    code = "InvalidParametersError"


class NoJobError(NotFoundError):
    code = "NoJobError"


class NoJobConfigError(NotFoundError):
    code = "NoJobConfigError"


class NoJobSshInfoError(NotFoundError):
    code = "NoJobSshInfoError"


class NoVirtualClusterError(NotFoundError):
    code = "NoVirtualClusterError"


class ConflictJobError(ConflictError):
    code = "ConflictJobError"


class ForbiddenUserError(ForbiddenError):
    code = "ForbiddenUserError"
