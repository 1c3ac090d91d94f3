"""pai settings, read from the environment.

Defaults are for a single development box (SQLite, ORM broker, local backend); production
sets `PAI_ENV=production` and must pass `manage.py check --deploy`.
"""

import os
import sys
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


def env(name, default=None):
    return os.environ.get(name, default)


def env_bool(name, default=False):
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name, default=""):
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


PAI_ENV = env("PAI_ENV", "development")
PRODUCTION = PAI_ENV == "production"

# Where pai keeps its own files on a single box: the SQLite database, task logs of the
# local backend, the development secret key. Made private to pai's user when pai makes it.
PAI_DATA_DIR = Path(env("PAI_DATA_DIR", str(BASE_DIR / "var")))


def development_secret_key(data_dir):
    """The box's own random key, made on first use and kept in the data directory (0600):
    a development install never signs sessions or derives keys from a published value."""
    path = data_dir / "secret_key"
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    import secrets

    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = data_dir / f"secret_key.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with open(fd, "w") as f:
        f.write(secrets.token_urlsafe(50) + "\n")
    try:
        os.link(tmp, path)  # the first process to start wins; the others read its key
    except FileExistsError:
        pass
    finally:
        tmp.unlink()
    return path.read_text().strip()


SECRET_KEY = env("SECRET_KEY")
if not SECRET_KEY:
    if PRODUCTION:
        raise ImproperlyConfigured("SECRET_KEY must be set when PAI_ENV=production")
    SECRET_KEY = development_secret_key(PAI_DATA_DIR)

# Fernet keys of the secrets stored encrypted (job secrets, registry credentials): a
# comma-separated list, the first encrypts, every one decrypts (key rotation).
PAI_SECRETS_KEYS = env_list("PAI_SECRETS_KEY")
if not PAI_SECRETS_KEYS:
    if PRODUCTION:
        raise ImproperlyConfigured("PAI_SECRETS_KEY must be set when PAI_ENV=production")
    import base64
    import hashlib

    # Development: a key derived from SECRET_KEY (random, per box), so a dev box needs no extra setting.
    PAI_SECRETS_KEYS = [base64.urlsafe_b64encode(hashlib.sha256(b"pai-secrets:" + SECRET_KEY.encode()).digest()).decode()]

DEBUG = env_bool("DEBUG", not PRODUCTION)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "" if PRODUCTION else "localhost,127.0.0.1,[::1],testserver")
if env("PAI_POD_IP"):
    # Prometheus scrapes each web pod at its own address (the Helm chart passes it).
    ALLOWED_HOSTS.append(env("PAI_POD_IP"))
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "pai.apps.PaiAdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "guardian",
    "django_q",
    "django_prometheus",
    "apps.audit",
    "apps.tenants",
    "apps.accounts",
    "apps.clusters",
    "apps.virtualclusters",
    "apps.storage",
    "apps.jobs",
    "apps.oncall",
    "apps.monitoring",
    "apps.usage",
    "apps.portal",
]

MIDDLEWARE = [
    # First and last: request counts and latency by view (route) for /metrics.
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    "pai.api.middleware.RestServerPrefixMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "pai.security.CurrentRequestMiddleware",
    "apps.accounts.timezones.UserTimeZoneMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "pai.security.ContentSecurityPolicyMiddleware",
    "django_prometheus.middleware.PrometheusAfterMiddleware",
]

ROOT_URLCONF = "pai.urls"
WSGI_APPLICATION = "pai.wsgi.application"
ASGI_APPLICATION = "pai.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

if not env("DATABASE_URL"):
    # The embedded default keeps its SQLite file there: a fresh checkout has no `var/` yet.
    PAI_DATA_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
DATABASES = {
    "default": dj_database_url.parse(
        env("DATABASE_URL", f"sqlite:///{PAI_DATA_DIR / 'pai.sqlite3'}"),
        conn_max_age=int(env("DB_CONN_MAX_AGE", "60")),
    )
}
# A connection the server dropped (a restart, a failover, pg_terminate_backend) is noticed
# before a request uses it, not by failing that request.
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # `manage.py runserver` serves each client connection in a thread of its own, kept while
    # the client keeps the connection alive, and each thread would hold a database
    # connection of its own: a pool shared by the threads bounds them (and hands them back
    # after each request). Production's gunicorn sync workers hold one each; in front of
    # many of them, use a pooler (PgBouncer, transaction mode) — see the README.
    pool_size = int(env("DB_POOL_MAX_SIZE", "10" if sys.argv[1:2] == ["runserver"] else "0"))
    if pool_size:
        DATABASES["default"]["CONN_MAX_AGE"] = 0
        DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
            "min_size": 1, "max_size": pool_size, "timeout": float(env("DB_POOL_TIMEOUT", "30")),
        }
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The embedded default runs web and worker against one file: wait for locks
    # instead of failing, and start write transactions eagerly.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {"timeout": 20, "transaction_mode": "IMMEDIATE", "init_command": "PRAGMA journal_mode=WAL;"}
    )
    DATABASES["default"]["CONN_MAX_AGE"] = 0

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# --- Authentication -------------------------------------------------------------------
PAI_AUTH_MODE = env("PAI_AUTH_MODE", "basic")
if PAI_AUTH_MODE not in {"basic", "oidc"}:
    raise ImproperlyConfigured("PAI_AUTH_MODE must be 'basic' or 'oidc'")

AUTHENTICATION_BACKENDS = [
    # First: refuses a locked-out user name or address before any password is checked.
    "apps.accounts.backends.LoginLockoutBackend",
    "django.contrib.auth.backends.ModelBackend",
    "apps.accounts.backends.PlatformAdminBackend",
    "guardian.backends.ObjectPermissionBackend",
]
if PAI_AUTH_MODE == "oidc":
    INSTALLED_APPS.append("mozilla_django_oidc")
    AUTHENTICATION_BACKENDS.insert(0, "apps.accounts.oidc.PaiOIDCBackend")
    OIDC_RP_CLIENT_ID = env("OIDC_RP_CLIENT_ID", "")
    OIDC_RP_CLIENT_SECRET = env("OIDC_RP_CLIENT_SECRET", "")
    OIDC_RP_SIGN_ALGO = env("OIDC_RP_SIGN_ALGO", "RS256")
    OIDC_OP_AUTHORIZATION_ENDPOINT = env("OIDC_OP_AUTHORIZATION_ENDPOINT", "")
    OIDC_OP_TOKEN_ENDPOINT = env("OIDC_OP_TOKEN_ENDPOINT", "")
    OIDC_OP_USER_ENDPOINT = env("OIDC_OP_USER_ENDPOINT", "")
    OIDC_OP_JWKS_ENDPOINT = env("OIDC_OP_JWKS_ENDPOINT", "")
    OIDC_RP_SCOPES = env("OIDC_RP_SCOPES", "openid email profile groups")
    # The provider's end-session endpoint: pai's logout ends the provider's session too.
    OIDC_OP_LOGOUT_ENDPOINT = env("OIDC_OP_LOGOUT_ENDPOINT", "")
    OIDC_OP_LOGOUT_URL_METHOD = "apps.accounts.oidc.provider_logout_url"
    OIDC_STORE_ID_TOKEN = True  # sent back as id_token_hint at logout
    OIDC_USE_PKCE = env_bool("OIDC_USE_PKCE", True)
    OIDC_TIMEOUT = int(env("OIDC_TIMEOUT", "10"))
    OIDC_VERIFY_SSL = env_bool("OIDC_VERIFY_SSL", True)
PAI_OIDC_USERNAME_CLAIM = env("PAI_OIDC_USERNAME_CLAIM", "preferred_username")
PAI_OIDC_EMAIL_CLAIM = env("PAI_OIDC_EMAIL_CLAIM", "email")
PAI_OIDC_GROUPS_CLAIM = env("PAI_OIDC_GROUPS_CLAIM", "groups")
# Named on the page that refuses a user in no group pai knows.
PAI_OIDC_ACCESS_CONTACT = env("PAI_OIDC_ACCESS_CONTACT", "the administrator of your team")

# Members sign in on pai's own page (the admin's refuses non-staff); in OIDC mode that
# page forwards them to the provider.
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
# Brute-force protection of every password login (API, pages, admin), `apps/accounts/lockout.py`:
# this many failures for a user name from one address lock it out from there for the lockout
# period; for a user name from anywhere (more), its unknown addresses, twice as long each
# time; from one address for any name, that address except for users who signed in from it.
PAI_LOGIN_MAX_FAILURES = int(env("PAI_LOGIN_MAX_FAILURES", "10"))
PAI_LOGIN_USER_MAX_FAILURES = int(env("PAI_LOGIN_USER_MAX_FAILURES", "30"))
PAI_LOGIN_ADDRESS_MAX_FAILURES = int(env("PAI_LOGIN_ADDRESS_MAX_FAILURES", "50"))
PAI_LOGIN_LOCKOUT_SECONDS = int(env("PAI_LOGIN_LOCKOUT_SECONDS", "900"))
PAI_LOGIN_KNOWN_ADDRESS_DAYS = int(env("PAI_LOGIN_KNOWN_ADDRESS_DAYS", "90"))
# Proxies in front of pai that append the client's address to X-Forwarded-For (an ingress: 1).
PAI_TRUSTED_PROXY_COUNT = int(env("PAI_TRUSTED_PROXY_COUNT", "0"))
# The longest a login token lives (OpenPAI's default lifetime); application tokens do not expire.
PAI_LOGIN_TOKEN_MAX_SECONDS = int(env("PAI_LOGIN_TOKEN_MAX_SECONDS", str(7 * 24 * 3600)))

# django-guardian: pai has no anonymous object permissions.
ANONYMOUS_USER_NAME = None
GUARDIAN_RAISE_403 = False

# --- Internationalisation -------------------------------------------------------------
LANGUAGE_CODE = "en-us"
TIME_ZONE = env("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

# --- Static files ---------------------------------------------------------------------
STATIC_URL = "/static/"
STATIC_ROOT = Path(env("STATIC_ROOT", str(BASE_DIR / "staticfiles")))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if PRODUCTION
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}

# --- E-mail ---------------------------------------------------------------------------
EMAIL_BACKEND = env(
    "EMAIL_BACKEND",
    "django.core.mail.backends.smtp.EmailBackend" if PRODUCTION else "django.core.mail.backends.console.EmailBackend",
)
EMAIL_HOST = env("EMAIL_HOST", "localhost")
EMAIL_PORT = int(env("EMAIL_PORT", "25"))
EMAIL_HOST_USER = env("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS")
DEFAULT_FROM_EMAIL = env("DEFAULT_FROM_EMAIL", "pai@localhost")
# The directory of Django's file-based e-mail backend (EMAIL_BACKEND=...filebased.EmailBackend).
EMAIL_FILE_PATH = env("EMAIL_FILE_PATH")

# --- pai ------------------------------------------------------------------------------
PAI_BACKEND = env("PAI_BACKEND", "local")
if PAI_BACKEND not in {"local", "kubernetes"}:
    raise ImproperlyConfigured("PAI_BACKEND must be 'local' or 'kubernetes'")
# How the local backend keeps tasks apart (README, "The local backend's sandbox").
PAI_LOCAL_SANDBOX = env("PAI_LOCAL_SANDBOX", "auto")
if PAI_LOCAL_SANDBOX not in {"auto", "required", "single-tenant", "off"}:
    raise ImproperlyConfigured("PAI_LOCAL_SANDBOX must be 'auto', 'required', 'single-tenant' or 'off'")
PAI_LOCAL_SANDBOX_UID_BASE = int(env("PAI_LOCAL_SANDBOX_UID_BASE", "1900000000"))
PAI_USER_MANUAL_URL = env("PAI_USER_MANUAL_URL", "https://openpai.readthedocs.io/en/latest/manual/cluster-user/")
# The address users reach pai at, written in e-mails. Required in production; in
# development e-mails sent while answering a request use the request's address
# (`pai.links.public_url`).
PAI_PUBLIC_URL = env("PAI_PUBLIC_URL", "").rstrip("/")
# How often a job's page (and the log follower) asks again while the job runs.
PAI_PORTAL_REFRESH_SECONDS = int(env("PAI_PORTAL_REFRESH_SECONDS", "10"))
if PRODUCTION and not PAI_PUBLIC_URL:
    raise ImproperlyConfigured("PAI_PUBLIC_URL must be set when PAI_ENV=production (the address users reach pai at)")
# How long the scheduler lease lasts without renewal: a dead leader is replaced after it.
PAI_SCHEDULER_LEASE_SECONDS = float(env("PAI_SCHEDULER_LEASE_SECONDS", "15"))
# The leader asks the database whether it still holds the lease (renewing it) before every
# batch of this many writes to a cluster, and at least every tenth of the lease.
PAI_SCHEDULER_LEASE_CHECK_WRITES = int(env("PAI_SCHEDULER_LEASE_CHECK_WRITES", "50"))
# Bounded cycles: at most this many jobs placed and pods created per cluster and cycle; the
# rest wait for the next cycle (the lease, the pod feed and the other clusters go on between).
PAI_SCHEDULER_MAX_PLACEMENTS_PER_CYCLE = int(env("PAI_SCHEDULER_MAX_PLACEMENTS_PER_CYCLE", "500"))
PAI_SCHEDULER_MAX_POD_CREATIONS_PER_CYCLE = int(env("PAI_SCHEDULER_MAX_POD_CREATIONS_PER_CYCLE", "1000"))
PAI_ALERTMANAGER_TOKEN = env("PAI_ALERTMANAGER_TOKEN", "")
# Bearer token Prometheus sends to /metrics; empty leaves /metrics open in development and
# closed in production.
PAI_METRICS_TOKEN = env("PAI_METRICS_TOKEN", "")  # bearer secret of the Alertmanager webhook; empty disables it
# Kubernetes backend (the client's rate limit is per cluster: Cluster.api_qps/api_burst): node label keys of
# SKU and topology, device indices.
# How long one call to a cluster's API keeps retrying (an API server restart passes inside it), and how
# long a cluster whose API stayed down through a call's retries is paused before the worker probes it.
PAI_KUBE_RETRY_SECONDS = float(env("PAI_KUBE_RETRY_SECONDS", "30"))
PAI_KUBE_CIRCUIT_SECONDS = float(env("PAI_KUBE_CIRCUIT_SECONDS", "10"))
# How much of an ended task's log pai keeps when the cluster forgets it with the pod (Kubernetes).
# GPU efficiency and the idle-GPU rule (apps.monitoring): how often the worker samples
# each running task's utilisation, the tag that exempts a job from the rule, and OpenPAI's
# "abnormal job" thresholds (running over N days, under 10 % GPU for 10 minutes).
PAI_GPU_SAMPLE_SECONDS = float(env("PAI_GPU_SAMPLE_SECONDS", "60"))
PAI_IDLE_GPU_EXEMPT_TAG = env("PAI_IDLE_GPU_EXEMPT_TAG", "idle-gpu-exempt")
PAI_ABNORMAL_JOB_DAYS = float(env("PAI_ABNORMAL_JOB_DAYS", "5"))
PAI_ABNORMAL_GPU_PERCENT = float(env("PAI_ABNORMAL_GPU_PERCENT", "10"))
PAI_ABNORMAL_GPU_MINUTES = float(env("PAI_ABNORMAL_GPU_MINUTES", "10"))
PAI_TASK_LOG_KEEP_BYTES = int(env("PAI_TASK_LOG_KEEP_BYTES", str(64 * 1024)))
PAI_KUBE_SKU_LABEL, PAI_KUBE_TOPOLOGY_LABELS = env("PAI_KUBE_SKU_LABEL", "pai.sku"), env_list("PAI_KUBE_TOPOLOGY_LABELS", "topology.kubernetes.io/zone,pai.rack")
# Requests to one cluster's API the worker keeps in flight at once (pod creations, log reads, deletions);
# the cluster's rate limit (Cluster.api_qps) still applies. 1: one at a time.
PAI_KUBE_CONCURRENCY = max(1, int(env("PAI_KUBE_CONCURRENCY", "8")))
# The taint key that keeps other workloads off pai's GPU nodes: pai's pods tolerate it (any value and effect).
PAI_KUBE_DEDICATED_TAINT = env("PAI_KUBE_DEDICATED_TAINT", "pai.dedicated")
PAI_KUBE_ASSIGN_DEVICES = env_bool("PAI_KUBE_ASSIGN_DEVICES")  # pai's device indices via NVIDIA_VISIBLE_DEVICES, not the device plugin

# --- REST API -------------------------------------------------------------------------
# Abuse limits, as bursts per second: a user's sweep of a few hundred jobs in a minute (and
# the polling that follows them) goes through; a runaway loop is slowed down. Submissions
# come in a burst of 300 (a sweep sent as fast as its script can, one after the other, went
# past 20 a second), then 20 a second (apps/jobs/api/throttles.py).
PAI_THROTTLE_API = env("PAI_THROTTLE_API", "50/second")
PAI_THROTTLE_JOB_SUBMIT = env("PAI_THROTTLE_JOB_SUBMIT", "20/second burst 300")
PAI_THROTTLE_JOB_LIST = env("PAI_THROTTLE_JOB_LIST", "10/second")
# The longest job document a submission may carry (413 beyond). OpenPAI's REST server took
# 100 kB (its body parser's default); pai allows a little more.
PAI_JOB_PROTOCOL_MAX_BYTES = int(env("PAI_JOB_PROTOCOL_MAX_BYTES", str(256 * 1024)))
# Tasks per job (FrameworkController's largest framework) and host ports per task.
PAI_JOB_MAX_TASKS = int(env("PAI_JOB_MAX_TASKS", "10000"))
PAI_JOB_MAX_PORTS_PER_TASK = int(env("PAI_JOB_MAX_PORTS_PER_TASK", "100"))
REST_FRAMEWORK = {
    # JSON and form bodies are read only up to DATA_UPLOAD_MAX_MEMORY_SIZE (413 beyond), JSON
    # nested at most 64 deep.
    "DEFAULT_PARSER_CLASSES": [
        "pai.api.parsers.JSONParser",
        "pai.api.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    # Bearer first: an unauthenticated request then gets 401 with WWW-Authenticate, as in OpenPAI.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "pai.api.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 100,
    "EXCEPTION_HANDLER": "pai.api.errors.exception_handler",
    # Bursts per client on every route, and per user on job submissions and job lists (the
    # jobs views' scoped throttles, which tenants may override). Counters live in the default cache.
    "DEFAULT_THROTTLE_CLASSES": [
        "rest_framework.throttling.AnonRateThrottle",
        "rest_framework.throttling.UserRateThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "anon": PAI_THROTTLE_API,
        "user": PAI_THROTTLE_API,
        "job_submit": PAI_THROTTLE_JOB_SUBMIT,
        "job_list": PAI_THROTTLE_JOB_LIST,
    },
}
SPECTACULAR_SETTINGS = {
    "TITLE": "pai REST API",
    "DESCRIPTION": "OpenPAI-compatible REST API v2 (same paths, fields and error bodies as OpenPAI's REST "
    "server, so OpenPAI clients work unchanged) and pai-native routes (DRF conventions: plural nouns, "
    "`limit`/`offset` pagination, filters, `?ordering=`). Authenticate with `Authorization: Bearer <token>` "
    "(POST /api/v2/authn/basic/login) or a browser session. Errors: `{\"code\": \"<OpenPAI error name>\", "
    "\"message\": \"...\"}`.",
    "VERSION": "2.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SCHEMA_PATH_PREFIX": r"/api/v2",
    "COMPONENT_SPLIT_REQUEST": True,
    "PREPROCESSING_HOOKS": ["pai.api.routing.drop_trailing_slash_twins", "pai.api.routing.drop_catch_all"],
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums", "pai.api.routing.name_legacy_user_routes",
    ],
    # One schema name per choice set that several fields use (`manage.py check --deploy` warns otherwise).
    "ENUM_NAME_OVERRIDES": {
        "JobStateEnum": "apps.jobs.choices.JobState",
        "JobSubStateEnum": "apps.jobs.choices.JobSubState",
        "ExecutionTypeEnum": "apps.jobs.choices.ExecutionType",
    },
    # The Swagger UI's assets come from the drf-spectacular-sidecar package, not a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# --- Worker (django-q2) ---------------------------------------------------------------
REDIS_URL = env("REDIS_URL")
Q_CLUSTER = {
    "name": env("Q_CLUSTER_NAME", "pai"),
    "workers": int(env("Q_WORKERS", "2")),
    # timeout below retry: a task is never handed out again while it still runs.
    "timeout": int(env("Q_TIMEOUT", "120")),
    "retry": int(env("Q_RETRY", "180")),
    "max_attempts": 3,
    "catch_up": False,
    "queue_limit": 50,
    "bulk": 10,
    "poll": 0.5,
}
if REDIS_URL:
    Q_CLUSTER["redis"] = REDIS_URL
else:
    Q_CLUSTER["orm"] = "default"

# Rate limits, login lockouts and the scheduler kick count in the cache: with Redis it is
# shared by every web and worker process; on one box the per-process memory cache does.
CACHES = {
    "default": {"BACKEND": "pai.cache.RedisCache", "LOCATION": REDIS_URL}
    if REDIS_URL
    else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
}

# --- Security headers (every environment) -------------------------------------------
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
# No CORS: pai sends no Access-Control-* header, so browsers keep other origins out.

# --- Production hardening -------------------------------------------------------------
if PRODUCTION:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
    # Prometheus scrapes pods over the cluster network, not through the TLS ingress.
    SECURE_REDIRECT_EXEMPT = [r"^metrics$"]
    SECURE_HSTS_SECONDS = int(env("SECURE_HSTS_SECONDS", "31536000"))
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL", "INFO")},
}
