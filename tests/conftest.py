import pytest
from django.conf import settings


def pytest_report_header(config):
    return f"database: {settings.DATABASES['default']['ENGINE']}"


@pytest.fixture(autouse=True)
def _locmem_email(settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"


def is_postgres():
    return settings.DATABASES["default"]["ENGINE"].endswith("postgresql")


requires_postgres = pytest.mark.skipif(not is_postgres(), reason="needs PostgreSQL (set DATABASE_URL)")
