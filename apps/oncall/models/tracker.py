import re

from django.core.exceptions import ValidationError
from django.db import models

from pai.security import EncryptedJSONField

REPOSITORY_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}$")


def validate_repository(value):
    if not REPOSITORY_RE.fullmatch(value or "") or value.split("/", 1)[1] in (".", ".."):
        raise ValidationError("Give the repository as owner/name, e.g. octo-org/cluster-ops.")


class GitHubRepository(models.Model):
    """Where incident follow-ups become issues (a platform setting; the first active row is used).

    `api_url` is GitHub's REST API (`https://api.github.com`) or a GitHub Enterprise Server's
    (`https://ghe.example.com/api/v3`). The token is a credential: stored encrypted
    (`PAI_SECRETS_KEY`) and never shown again once saved. It needs the Issues permission
    (read and write) on the repository.
    """

    api_url = models.URLField(max_length=300, default="https://api.github.com",
                              help_text="GitHub's REST API, or a GitHub Enterprise Server's (https://HOST/api/v3).")
    repository = models.CharField(max_length=140, validators=[validate_repository],
                                  help_text="owner/name of the repository the issues are opened in.")
    labels = models.CharField(max_length=300, blank=True, default="incident-follow-up",
                              help_text="Labels put on every issue, separated by commas.")
    secret = EncryptedJSONField(default=dict, editable=False)
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-active", "id"]
        verbose_name = "GitHub repository"
        verbose_name_plural = "GitHub repository for follow-ups"

    def __str__(self):
        return self.repository

    @property
    def token(self):
        return self.secret.get("token", "")

    @token.setter
    def token(self, value):
        self.secret = {"token": value}

    def label_list(self):
        return [name.strip() for name in self.labels.split(",") if name.strip()][:20]

    @classmethod
    def current(cls):
        return cls.objects.filter(active=True).order_by("id").first()
