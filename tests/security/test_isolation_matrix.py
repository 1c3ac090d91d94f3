"""Isolation, proven: every API route, every HTML page and every admin page, for every principal.

Routes come from the URL resolver and models from the admin registry, so a new route or
admin registration fails `test_every_*_declares_its_rule` until its row is added below.
Each row is the exact status every principal gets on Team A's objects (`matrix_world`),
in this order:

    (anonymous, a_member, a_admin, b_member, root, guest)

API routes and HTML pages are requested with every method their view implements (plain
function views with GET and POST), with an empty body, each request rolled back so that
the next one sees the same world; a route and its trailing-slash twin must answer alike.
Admin pages are the changelist, the add page, the change page of a Team A row (where the
model has rows) and, for shared models, guardian's object-permission page.

`guest` is Team B's `b_guest`, who holds shares of Team A's VC and storage (through the
group `team_b_guests`) and a read-only share of a_member's job `shared_job`. Team B's
`b_member` holds none. Nothing answers 500; and wherever b_member gets 404 for a Team A
object, a name that exists nowhere gets the very same answer
(`test_hidden_objects_answer_as_missing_ones`), so a denial does not tell that the object
exists. Routes only admins may call answer 403 whatever the target.
"""

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db import transaction
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from apps.accounts import services as account_services
from apps.accounts import sharing
from apps.accounts.sharing_admin import SharingAdminMixin
from apps.oncall import services as oncall_services
from apps.oncall.models import Rotation, RotationMember
from apps.tenants.models import Membership
from tests import factories as f
from tests.jobs.factories import running_attempt, submitted_job

from . import routes

PRINCIPALS = ("anonymous", "a_member", "a_admin", "b_member", "root", "guest")

API = {
    ('GET', 'api/docs'):
        (200, 200, 200, 200, 200, 200),
    ('GET', 'api/schema'):
        (200, 200, 200, 200, 200, 200),
    ('GET', 'api/v2/alerts'):
        (401, 200, 200, 200, 200, 200),
    ('POST', 'api/v2/alerts/webhook'):
        (403, 403, 403, 403, 403, 403),
    ('POST', 'api/v2/authn/basic/login'):
        (400, 400, 400, 400, 400, 400),
    ('DELETE', 'api/v2/authn/basic/logout'):
        (401, 200, 200, 200, 200, 200),
    ('GET', 'api/v2/authn/oidc/login'):
        (404, 404, 404, 404, 404, 404),
    ('GET', 'api/v2/authn/oidc/logout'):
        (404, 404, 404, 404, 404, 404),
    ('GET', 'api/v2/clusters'):
        (401, 200, 200, 200, 200, 200),
    ('POST', 'api/v2/clusters'):
        (401, 403, 403, 403, 400, 403),
    ('GET', 'api/v2/clusters/{cluster_name}/cell-types'):
        (401, 200, 200, 200, 200, 200),
    ('POST', 'api/v2/clusters/{cluster_name}/cell-types'):
        (401, 403, 403, 403, 400, 403),
    ('GET', 'api/v2/clusters/{cluster_name}/cell-types/{name}'):
        (401, 200, 200, 200, 200, 200),
    ('PUT', 'api/v2/clusters/{cluster_name}/cell-types/{name}'):
        (401, 403, 403, 403, 400, 403),
    ('PATCH', 'api/v2/clusters/{cluster_name}/cell-types/{name}'):
        (401, 403, 403, 403, 200, 403),
    ('DELETE', 'api/v2/clusters/{cluster_name}/cell-types/{name}'):
        (401, 403, 403, 403, 409, 403),
    ('GET', 'api/v2/clusters/{cluster_name}/nodes'):
        (401, 200, 200, 200, 200, 200),
    ('POST', 'api/v2/clusters/{cluster_name}/nodes'):
        (401, 403, 403, 403, 405, 403),
    ('GET', 'api/v2/clusters/{cluster_name}/nodes/{name}'):
        (401, 200, 200, 200, 200, 200),
    ('PUT', 'api/v2/clusters/{cluster_name}/nodes/{name}'):
        (401, 403, 403, 403, 405, 403),
    ('PATCH', 'api/v2/clusters/{cluster_name}/nodes/{name}'):
        (401, 403, 403, 403, 405, 403),
    ('DELETE', 'api/v2/clusters/{cluster_name}/nodes/{name}'):
        (401, 403, 403, 403, 405, 403),
    ('GET', 'api/v2/clusters/{cluster_name}/physical-cells'):
        (401, 200, 200, 200, 200, 200),
    ('POST', 'api/v2/clusters/{cluster_name}/physical-cells'):
        (401, 403, 403, 403, 400, 403),
    ('GET', 'api/v2/clusters/{cluster_name}/physical-cells/{address}'):
        (401, 200, 200, 200, 200, 200),
    ('PUT', 'api/v2/clusters/{cluster_name}/physical-cells/{address}'):
        (401, 403, 403, 403, 400, 403),
    ('PATCH', 'api/v2/clusters/{cluster_name}/physical-cells/{address}'):
        (401, 403, 403, 403, 200, 403),
    ('DELETE', 'api/v2/clusters/{cluster_name}/physical-cells/{address}'):
        (401, 403, 403, 403, 204, 403),
    ('GET', 'api/v2/clusters/{name}'):
        (401, 200, 200, 200, 200, 200),
    ('PUT', 'api/v2/clusters/{name}'):
        (401, 403, 403, 403, 400, 403),
    ('PATCH', 'api/v2/clusters/{name}'):
        (401, 403, 403, 403, 200, 403),
    ('DELETE', 'api/v2/clusters/{name}'):
        (401, 403, 403, 403, 409, 403),
    ('GET', 'api/v2/groups'):
        (401, 200, 200, 200, 200, 200),
    ('POST', 'api/v2/groups'):
        (401, 403, 400, 403, 400, 403),
    ('PUT', 'api/v2/groups'):
        (401, 400, 400, 400, 400, 400),
    ('GET', 'api/v2/groups/{groupname}'):
        (401, 200, 200, 404, 200, 404),
    ('DELETE', 'api/v2/groups/{groupname}'):
        (401, 403, 201, 404, 201, 404),
    ('GET', 'api/v2/groups/{groupname}/userlist'):
        (401, 200, 200, 404, 200, 404),
    ('GET', 'api/v2/incidents'):
        (401, 200, 200, 200, 200, 200),
    ('POST', 'api/v2/incidents'):
        (401, 400, 400, 400, 400, 400),
    ('GET', 'api/v2/incidents/{pk}'):
        (401, 200, 404, 404, 200, 404),
    ('POST', 'api/v2/incidents/{pk}/acknowledge'):
        (401, 403, 404, 404, 200, 404),
    ('POST', 'api/v2/incidents/{pk}/close'):
        (401, 403, 404, 404, 409, 404),
    ('POST', 'api/v2/incidents/{pk}/confirm-severity'):
        (401, 403, 404, 404, 400, 404),
    ('POST', 'api/v2/incidents/{pk}/mitigate'):
        (401, 403, 404, 404, 200, 404),
    ('POST', 'api/v2/incidents/{pk}/resolve'):
        (401, 403, 404, 404, 409, 404),
    ('POST', 'api/v2/incidents/{pk}/review'):
        (401, 403, 404, 404, 400, 404),
    ('POST', 'api/v2/incidents/{pk}/update'):
        (401, 403, 404, 404, 400, 404),
    ('GET', 'api/v2/info'):
        (200, 200, 200, 200, 200, 200),
    ('GET', 'api/v2/jobs'):
        (401, 200, 200, 200, 200, 200),
    ('POST', 'api/v2/jobs'):
        (401, 400, 400, 400, 400, 400),
    ('GET', 'api/v2/jobs/{username}~{name}'):
        (401, 200, 200, 404, 200, 200),
    ('GET', 'api/v2/jobs/{username}~{name}/attempts/{attempt_index}'):
        (401, 200, 200, 404, 200, 200),
    ('GET', 'api/v2/jobs/{username}~{name}/ssh'):
        (401, 404, 404, 404, 404, 404),
    ('GET', 'api/v2/jobs/{username}~{name}/job-attempts/healthz'):
        (401, 200, 200, 200, 200, 200),
    ('GET', 'api/v2/job-attempts/healthz'):
        (401, 200, 200, 200, 200, 200),
    ('GET', 'api/v2/jobs/{username}~{name}/attempts/{attempt_index}/taskRoles/{task_role}/taskIndex/{task_index}/attempts'):
        (401, 200, 200, 404, 200, 200),
    ('GET', 'api/v2/jobs/{username}~{name}/attempts/{attempt_index}/taskRoles/{task_role}/taskIndex/{task_index}/attempts/{task_attempt_index}/logs'):
        (401, 200, 200, 404, 200, 200),
    ('GET', 'api/v2/jobs/{username}~{name}/attempts/{attempt_index}/taskRoles/{task_role}/taskIndex/{task_index}/attempts/{task_attempt_index}/logs/all'):
        (401, 200, 200, 404, 200, 200),
    ('GET', 'api/v2/jobs/{username}~{name}/shares'):
        (401, 200, 200, 404, 200, 403),
    ('PUT', 'api/v2/jobs/{username}~{name}/shares'):
        (401, 400, 400, 404, 400, 403),
    ('GET', 'api/v2/jobs/{username}~{name}/config'):
        (401, 200, 200, 404, 200, 200),
    ('GET', 'api/v2/jobs/{username}~{name}/events'):
        (401, 200, 200, 404, 200, 200),
    ('PUT', 'api/v2/jobs/{username}~{name}/executionType'):
        (401, 400, 400, 404, 400, 403),
    ('GET', 'api/v2/jobs/{username}~{name}/job-attempts'):
        (401, 200, 200, 404, 200, 200),
    ('GET', 'api/v2/jobs/{username}~{name}/job-attempts/{attempt_index}'):
        (401, 200, 200, 404, 200, 200),
    ('PUT', 'api/v2/jobs/{username}~{name}/tag'):
        (401, 400, 400, 404, 400, 403),
    ('DELETE', 'api/v2/jobs/{username}~{name}/tag'):
        (401, 400, 400, 404, 400, 403),
    ('GET', 'api/v2/kubernetes/nodes'):
        (401, 403, 403, 403, 200, 403),
    ('GET', 'api/v2/kubernetes/pods'):
        (401, 403, 403, 403, 200, 403),
    ('GET', 'api/v2/oncall/now'):
        (401, 200, 200, 200, 200, 200),
    ('GET', 'api/v2/rotations'):
        (401, 200, 200, 200, 200, 200),
    ('GET', 'api/v2/rotations/{pk}'):
        (401, 200, 200, 404, 200, 404),
    ('GET', 'api/v2/rotations/{pk}/fair-share'):
        (401, 200, 200, 404, 200, 404),
    ('POST', 'api/v2/rotations/{pk}/overrides'):
        (401, 400, 400, 400, 400, 400),
    ('GET', 'api/v2/rotations/{pk}/shifts'):
        (401, 200, 200, 404, 200, 404),
    ('POST', 'api/v2/rotations/{pk}/swap'):
        (401, 400, 400, 400, 400, 400),
    ('GET', 'api/v2/storages'):
        (401, 200, 200, 200, 200, 200),
    ('GET', 'api/v2/storages/{name}'):
        (401, 200, 200, 404, 200, 200),
    ('GET', 'api/v2/tenants'):
        (401, 200, 200, 200, 200, 200),
    ('GET', 'api/v2/tenants/{slug}'):
        (401, 200, 200, 404, 200, 404),
    ('GET', 'api/v2/tokens'):
        (401, 200, 200, 200, 200, 200),
    # Scoped by row: members their own usage, team admins their tenants', platform admins all (tests/usage).
    ('GET', 'api/v2/usage'):
        (401, 200, 200, 200, 200, 200),
    ('POST', 'api/v2/tokens/application'):
        (401, 200, 200, 200, 200, 200),
    ('DELETE', 'api/v2/tokens/{token}'):
        (401, 200, 404, 404, 404, 404),
    ('GET', 'api/v2/users'):
        (401, 200, 200, 200, 200, 200),
    ('POST', 'api/v2/users'):
        (401, 403, 400, 403, 400, 403),
    ('PUT', 'api/v2/users'):
        (401, 403, 400, 403, 400, 403),
    ('GET', 'api/v2/users/me'):
        (401, 200, 200, 200, 200, 200),
    ('PUT', 'api/v2/users/me'):
        (401, 400, 400, 400, 400, 400),
    ('GET', 'api/v2/users/{username}'):
        (401, 200, 200, 404, 200, 404),
    ('DELETE', 'api/v2/users/{username}'):
        (401, 403, 409, 404, 409, 404),
    ('PUT', 'api/v2/users/{username}/group'):
        (401, 403, 400, 403, 400, 403),
    ('DELETE', 'api/v2/users/{username}/group'):
        (401, 403, 400, 403, 400, 403),
    ('PUT', 'api/v2/users/{username}/grouplist'):
        (401, 403, 400, 403, 400, 403),
    ('GET', 'api/v2/user'):
        (401, 200, 200, 200, 200, 200),
    ('POST', 'api/v2/user'):
        (401, 403, 400, 403, 400, 403),
    ('PUT', 'api/v2/user'):
        (401, 403, 400, 403, 400, 403),
    ('GET', 'api/v2/user/{username}'):
        (401, 200, 200, 404, 200, 404),
    ('DELETE', 'api/v2/user/{username}'):
        (401, 403, 409, 404, 409, 404),
    ('PUT', 'api/v2/user/{username}/group'):
        (401, 403, 400, 403, 400, 403),
    ('DELETE', 'api/v2/user/{username}/group'):
        (401, 403, 400, 403, 400, 403),
    ('PUT', 'api/v2/user/{username}/grouplist'):
        (401, 403, 400, 403, 400, 403),
    ('PUT', 'api/v2/user/{username}/password'):
        (401, 400, 400, 403, 400, 403),
    ('PUT', 'api/v2/user/{username}/email'):
        (401, 400, 400, 403, 400, 403),
    ('PUT', 'api/v2/user/{username}/admin'):
        (401, 403, 400, 403, 400, 403),
    ('PUT', 'api/v2/user/{username}/virtualcluster'):
        (401, 403, 400, 403, 400, 403),
    ('PUT', 'api/v2/user/{username}/extension'):
        (401, 403, 400, 403, 400, 403),
    ('GET', 'api/{path}'):
        (404, 404, 404, 404, 404, 404),
    ('POST', 'api/{path}'):
        (404, 404, 404, 404, 404, 404),
    ('PUT', 'api/{path}'):
        (404, 404, 404, 404, 404, 404),
    ('PATCH', 'api/{path}'):
        (404, 404, 404, 404, 404, 404),
    ('DELETE', 'api/{path}'):
        (404, 404, 404, 404, 404, 404),
    ('GET', 'api/v2/virtual-clusters'):
        (401, 200, 200, 200, 200, 200),
    ('GET', 'api/v2/virtual-clusters/{name}'):
        (401, 200, 200, 404, 200, 200),
    ('GET', 'api/v2/virtual-clusters/{name}/quota'):
        (401, 200, 200, 404, 200, 200),
    ('PUT', 'api/v2/virtual-clusters/{name}/quota'):
        (401, 403, 403, 404, 400, 403),
    ('GET', 'api/v2/virtual-clusters/{name}/sku-types'):
        (401, 200, 200, 404, 200, 200),
    ('GET', 'api/v2/cluster/sku-types'):
        (401, 200, 200, 200, 200, 200),
}
HTML = {
    ('GET', 'accounts/login'):
        (200, 200, 200, 200, 200, 200),
    ('POST', 'accounts/login'):
        (200, 200, 200, 200, 200, 200),
    ('PUT', 'accounts/login'):
        (200, 200, 200, 200, 200, 200),
    ('GET', 'accounts/logout'):
        (200, 200, 200, 200, 200, 200),
    ('POST', 'accounts/logout'):
        (200, 200, 200, 200, 200, 200),
    ('GET', 'accounts/password_change'):
        (302, 200, 200, 200, 200, 200),
    ('POST', 'accounts/password_change'):
        (302, 200, 200, 200, 200, 200),
    ('PUT', 'accounts/password_change'):
        (302, 200, 200, 200, 200, 200),
    ('GET', 'accounts/password_change/done'):
        (302, 200, 200, 200, 200, 200),
    ('GET', 'accounts/password_reset'):
        (200, 200, 200, 200, 200, 200),
    ('POST', 'accounts/password_reset'):
        (200, 200, 200, 200, 200, 200),
    ('PUT', 'accounts/password_reset'):
        (200, 200, 200, 200, 200, 200),
    ('GET', 'accounts/password_reset/done'):
        (200, 200, 200, 200, 200, 200),
    ('GET', 'accounts/reset/done'):
        (200, 200, 200, 200, 200, 200),
    ('GET', 'accounts/time-zone'):
        (302, 200, 200, 200, 200, 200),
    ('POST', 'accounts/time-zone'):
        (302, 200, 200, 200, 200, 200),
    ('GET', 'accounts/reset/{uidb64}/{token}'):
        (200, 200, 200, 200, 200, 200),
    ('POST', 'accounts/reset/{uidb64}/{token}'):
        (200, 200, 200, 200, 200, 200),
    ('PUT', 'accounts/reset/{uidb64}/{token}'):
        (200, 200, 200, 200, 200, 200),
    ('GET', 'healthz'):
        (200, 200, 200, 200, 200, 200),
    ('POST', 'healthz'):
        (200, 200, 200, 200, 200, 200),
    # Open on a development box (production asks for PAI_METRICS_TOKEN): tests/monitoring.
    ('GET', 'metrics'):
        (200, 200, 200, 200, 200, 200),
    ('POST', 'metrics'):
        (405, 405, 405, 405, 405, 405),
    ('GET', 'oidc/authenticate'):
        (404, 404, 404, 404, 404, 404),
    ('GET', 'oidc/callback'):
        (404, 404, 404, 404, 404, 404),
    ('GET', 'oidc/logout'):
        (404, 404, 404, 404, 404, 404),
    ('POST', 'oidc/logout'):
        (404, 404, 404, 404, 404, 404),
    ('GET', 'oidc/token'):
        (404, 404, 404, 404, 404, 404),
    ('POST', 'oidc/token'):
        (404, 404, 404, 404, 404, 404),
    ('GET', 'oncall'):
        (302, 200, 200, 200, 200, 200),
    ('POST', 'oncall'):
        (302, 200, 200, 200, 200, 200),
    ('GET', 'oncall/dashboard'):
        (302, 200, 200, 200, 200, 200),
    ('POST', 'oncall/dashboard'):
        (302, 200, 200, 200, 200, 200),
    ('GET', 'oncall/follow-ups/{pk}/done'):
        (302, 405, 405, 405, 405, 405),
    ('POST', 'oncall/follow-ups/{pk}/done'):
        (302, 403, 404, 404, 302, 404),
    ('GET', 'oncall/follow-ups/{pk}/github-issue'):
        (302, 405, 405, 405, 405, 405),
    ('POST', 'oncall/follow-ups/{pk}/github-issue'):
        (302, 403, 404, 404, 302, 404),
    ('GET', 'oncall/incidents/new'):
        (302, 200, 200, 200, 200, 200),
    ('POST', 'oncall/incidents/new'):
        (302, 200, 200, 200, 200, 200),
    ('GET', 'oncall/incidents/{pk}'):
        (302, 200, 404, 404, 200, 404),
    ('POST', 'oncall/incidents/{pk}'):
        (302, 200, 404, 404, 200, 404),
    ('GET', 'oncall/incidents/{pk}/{action}'):
        (302, 405, 405, 405, 405, 405),
    ('POST', 'oncall/incidents/{pk}/{action}'):
        (302, 403, 404, 404, 302, 404),
    ('GET', 'oncall/rotations'):
        (302, 200, 200, 200, 200, 200),
    ('POST', 'oncall/rotations'):
        (302, 200, 200, 200, 200, 200),
    ('GET', 'oncall/status'):
        (302, 200, 200, 200, 200, 200),
    ('POST', 'oncall/status'):
        (302, 200, 200, 200, 200, 200),
    ('GET', 'oncall/rotations/{pk}/overrides'):
        (302, 405, 405, 405, 405, 405),
    ('POST', 'oncall/rotations/{pk}/overrides'):
        (302, 200, 200, 404, 200, 404),
    ('GET', 'readyz'):
        (200, 200, 200, 200, 200, 200),
    ('POST', 'readyz'):
        (200, 200, 200, 200, 200, 200),
}
# The portal's pages (apps/portal), one block per page family. Signed-out visitors are sent to
# sign in (302); a job's pages answer 404 to whoever may not read the job, as a missing one.
PORTAL = {
    # Home, job list, job detail, stop, bulk actions, logs (apps/portal/views/jobs.py).
    ('GET', ''):
        (200, 200, 200, 200, 200, 200),
    ('POST', ''):
        (405, 405, 405, 405, 405, 405),
    ('GET', 'jobs'):
        (302, 200, 200, 200, 200, 200),
    ('POST', 'jobs'):
        (302, 405, 405, 405, 405, 405),
    # An empty POST names no job: back to the list with the error.
    ('GET', 'jobs/bulk'):
        (302, 405, 405, 405, 405, 405),
    ('POST', 'jobs/bulk'):
        (302, 302, 302, 302, 302, 302),
    # Abnormal jobs: each sees those they may stop (none in this world), never others'.
    ('GET', 'jobs/abnormal'):
        (302, 200, 200, 200, 200, 200),
    ('POST', 'jobs/abnormal'):
        (302, 405, 405, 405, 405, 405),
    ('GET', 'jobs/{username}~{name}'):
        (302, 200, 200, 404, 200, 200),
    ('POST', 'jobs/{username}~{name}'):
        (302, 405, 405, 405, 405, 405),
    # The guest holds a read-only share: 403.
    ('GET', 'jobs/{username}~{name}/stop'):
        (302, 405, 405, 405, 405, 405),
    ('POST', 'jobs/{username}~{name}/stop'):
        (302, 302, 302, 404, 302, 403),
    # Re-submit copies the job as the signed-in user (whoever may read it), then shows the copy,
    # or the job with the reason there is none (the guest may not use Team A's VC).
    ('GET', 'jobs/{username}~{name}/resubmit'):
        (302, 405, 405, 405, 405, 405),
    ('POST', 'jobs/{username}~{name}/resubmit'):
        (302, 303, 303, 404, 303, 303),
    ('GET', 'jobs/{username}~{name}/attempts/{attempt}/tasks/{role}/{index}/log'):
        (302, 200, 200, 404, 200, 200),
    ('POST', 'jobs/{username}~{name}/attempts/{attempt}/tasks/{role}/{index}/log'):
        (302, 405, 405, 405, 405, 405),
    # Submission, clone, templates (apps/portal/views/submit.py). An empty POST checks an empty
    # document (400); a job is cloned by whoever may read it, the read-only guest included.
    ('GET', 'submit'):
        (302, 200, 200, 200, 200, 200),
    ('POST', 'submit'):
        (302, 400, 400, 400, 400, 400),
    ('POST', 'submit/check'):
        (302, 400, 400, 400, 400, 400),
    ('GET', 'jobs/{username}~{name}/clone'):
        (302, 200, 200, 404, 200, 200),
    # Virtual clusters, the cluster, the account (apps/portal/views/vcs.py, cluster.py, account.py).
    # The guest sees Team A's VC through its share; the cluster page is for platform admins.
    ('GET', 'vcs'):
        (302, 200, 200, 200, 200, 200),
    ('POST', 'vcs'):
        (302, 405, 405, 405, 405, 405),
    ('GET', 'vcs/{name}'):
        (302, 200, 200, 404, 200, 200),
    ('POST', 'vcs/{name}'):
        (302, 405, 405, 405, 405, 405),
    ('GET', 'cluster'):
        (302, 403, 403, 403, 200, 403),
    ('POST', 'cluster'):
        (302, 405, 405, 405, 405, 405),
    # The account routes act on the signed-in user only; the token is a_member's. An empty
    # POST is a field error (400), but for the default VC, where empty means "automatic".
    ('GET', 'account'):
        (302, 200, 200, 200, 200, 200),
    ('POST', 'account'):
        (302, 405, 405, 405, 405, 405),
    ('GET', 'account/tokens'):
        (302, 405, 405, 405, 405, 405),
    ('POST', 'account/tokens'):
        (302, 400, 400, 400, 400, 400),
    ('GET', 'account/tokens/{token}/revoke'):
        (302, 405, 405, 405, 405, 405),
    ('POST', 'account/tokens/{token}/revoke'):
        (302, 302, 404, 404, 404, 404),
    ('GET', 'account/password'):
        (302, 405, 405, 405, 405, 405),
    ('POST', 'account/password'):
        (302, 400, 400, 400, 400, 400),
    ('GET', 'account/email'):
        (302, 405, 405, 405, 405, 405),
    ('POST', 'account/email'):
        (302, 400, 400, 400, 400, 400),
    ('GET', 'account/preferences'):
        (302, 405, 405, 405, 405, 405),
    ('POST', 'account/preferences'):
        (302, 302, 302, 302, 302, 302),
}
HTML.update(PORTAL)
# Admin pages per registered model: page -> the status for each principal.
ADMIN = {
    'accounts.group': {
        'changelist': (302, 302, 200, 302, 200, 302),
        'add': (302, 302, 200, 302, 200, 302),
        'change': (302, 302, 200, 302, 200, 302),
    },
    'audit.auditentry': {
        'changelist': (302, 302, 200, 302, 200, 302),
        'add': (302, 302, 403, 302, 403, 302),
        'change': (302, 302, 200, 302, 200, 302),
    },
    'auth.user': {
        'changelist': (302, 302, 200, 302, 200, 302),
        'add': (302, 302, 403, 302, 200, 302),
        'change': (302, 302, 200, 302, 200, 302),
    },
    'clusters.celltype': {
        'changelist': (302, 302, 403, 302, 200, 302),
        'add': (302, 302, 403, 302, 200, 302),
        'change': (302, 302, 403, 302, 200, 302),
    },
    'clusters.cluster': {
        'changelist': (302, 302, 403, 302, 200, 302),
        'add': (302, 302, 403, 302, 200, 302),
        'change': (302, 302, 403, 302, 200, 302),
    },
    'clusters.node': {
        'changelist': (302, 302, 403, 302, 200, 302),
        'add': (302, 302, 403, 302, 200, 302),
        'change': (302, 302, 403, 302, 200, 302),
    },
    'clusters.physicalcell': {
        'changelist': (302, 302, 403, 302, 200, 302),
        'add': (302, 302, 403, 302, 200, 302),
        'change': (302, 302, 403, 302, 200, 302),
    },
    'django_q.failure': {
        'changelist': (302, 302, 403, 302, 200, 302),
        'add': (302, 302, 403, 302, 403, 302),
    },
    'django_q.ormq': {
        'changelist': (302, 302, 403, 302, 200, 302),
        'add': (302, 302, 403, 302, 403, 302),
    },
    'django_q.schedule': {
        'changelist': (302, 302, 403, 302, 200, 302),
        'add': (302, 302, 403, 302, 200, 302),
        'change': (302, 302, 403, 302, 200, 302),
    },
    'django_q.success': {
        'changelist': (302, 302, 403, 302, 200, 302),
        'add': (302, 302, 403, 302, 403, 302),
    },
    'jobs.job': {
        'changelist': (302, 302, 200, 302, 200, 302),
        'add': (302, 302, 403, 302, 403, 302),
        'change': (302, 302, 200, 302, 200, 302),
        'permissions': (302, 302, 200, 302, 200, 302),
    },
    # Only abnormal jobs are listed; a job that is not abnormal is "missing" here (Django's
    # redirect to the index), whoever asks.
    'monitoring.abnormalrunningjob': {
        'changelist': (302, 302, 200, 302, 200, 302),
        'add': (302, 302, 403, 302, 403, 302),
        'change': (302, 302, 302, 302, 302, 302),
        'permissions': (302, 302, 404, 302, 404, 302),
    },
    'oncall.alert': {
        'changelist': (302, 302, 403, 302, 200, 302),
        'add': (302, 302, 403, 302, 403, 302),
    },
    'oncall.alertroute': {
        'changelist': (302, 302, 403, 302, 200, 302),
        'add': (302, 302, 403, 302, 200, 302),
    },
    'oncall.chatwebhook': {
        'changelist': (302, 302, 403, 302, 200, 302),
        'add': (302, 302, 403, 302, 200, 302),
    },
    'oncall.githubrepository': {
        'changelist': (302, 302, 403, 302, 200, 302),
        'add': (302, 302, 403, 302, 200, 302),
    },
    'oncall.followup': {
        'changelist': (302, 302, 403, 302, 200, 302),
        'add': (302, 302, 403, 302, 200, 302),
        'change': (302, 302, 403, 302, 200, 302),
    },
    'oncall.incident': {
        'changelist': (302, 302, 403, 302, 200, 302),
        'add': (302, 302, 403, 302, 403, 302),
        'change': (302, 302, 403, 302, 200, 302),
    },
    'oncall.monitoringcalendar': {
        'changelist': (302, 302, 403, 302, 200, 302),
        'add': (302, 302, 403, 302, 200, 302),
        'change': (302, 302, 403, 302, 200, 302),
    },
    'oncall.notification': {
        'changelist': (302, 302, 403, 302, 200, 302),
        'add': (302, 302, 403, 302, 403, 302),
    },
    'oncall.rotation': {
        'changelist': (302, 302, 403, 302, 200, 302),
        'add': (302, 302, 403, 302, 200, 302),
        'change': (302, 302, 403, 302, 200, 302),
    },
    'oncall.rotationoverride': {
        'changelist': (302, 302, 403, 302, 200, 302),
        'add': (302, 302, 403, 302, 200, 302),
    },
    'oncall.slapolicy': {
        'changelist': (302, 302, 403, 302, 200, 302),
        'add': (302, 302, 403, 302, 200, 302),
        'change': (302, 302, 403, 302, 200, 302),
    },
    'oncall.timelineentry': {
        'changelist': (302, 302, 403, 302, 200, 302),
        'add': (302, 302, 403, 302, 403, 302),
        'change': (302, 302, 403, 302, 200, 302),
    },
    'storage.storageconfig': {
        'changelist': (302, 302, 200, 302, 200, 302),
        'add': (302, 302, 200, 302, 200, 302),
        'change': (302, 302, 200, 302, 200, 302),
        'permissions': (302, 302, 200, 302, 200, 302),
    },
    'storage.storagegrant': {
        'changelist': (302, 302, 200, 302, 200, 302),
        'add': (302, 302, 200, 302, 200, 302),
        'change': (302, 302, 200, 302, 200, 302),
    },
    'storage.storageserver': {
        'changelist': (302, 302, 200, 302, 200, 302),
        'add': (302, 302, 403, 302, 200, 302),
        'change': (302, 302, 200, 302, 200, 302),
    },
    'tenants.membership': {
        'changelist': (302, 302, 200, 302, 200, 302),
        'add': (302, 302, 200, 302, 200, 302),
        'change': (302, 302, 200, 302, 200, 302),
    },
    'tenants.tenant': {
        'changelist': (302, 302, 200, 302, 200, 302),
        'add': (302, 302, 403, 302, 200, 302),
        'change': (302, 302, 200, 302, 200, 302),
    },
    # Read-only for team admins (their tenants' rows); budgets are set by platform admins.
    'usage.gpuhourbudget': {
        'changelist': (302, 302, 200, 302, 200, 302),
        'add': (302, 302, 403, 302, 200, 302),
    },
    'usage.usagerecord': {
        'changelist': (302, 302, 200, 302, 200, 302),
        'add': (302, 302, 403, 302, 403, 302),
    },
    'virtualclusters.virtualcluster': {
        'changelist': (302, 302, 200, 302, 200, 302),
        'add': (302, 302, 403, 302, 200, 302),
        'change': (302, 302, 200, 302, 200, 302),
        'permissions': (302, 302, 200, 302, 200, 302),
    },
    'virtualclusters.virtualclustergrant': {
        'changelist': (302, 302, 200, 302, 200, 302),
        'add': (302, 302, 200, 302, 200, 302),
        'change': (302, 302, 200, 302, 200, 302),
    },
}


@pytest.fixture
def matrix_world(world, tmp_path, settings):
    w = world
    settings.PAI_DATA_DIR = str(tmp_path)
    w.guest = f.UserFactory(username="b_guest")
    f.MembershipFactory(tenant=w.tenant_b, user=w.guest, role=Membership.Role.MEMBER)
    guests = f.GroupFactory(name="team_b_guests", tenant=w.tenant_b)
    w.guest.groups.add(guests)
    sharing.share_with_group(w.a_admin, w.vc_a, guests)
    sharing.share_with_group(w.a_admin, w.storage_a, guests)
    w.job = submitted_job(w.a_member, name="shared_job", vc="team_a")
    log = tmp_path / "taskrole-0.log"
    log.write_text("epoch 1: loss 0.3\n")
    running_attempt(w.job, log_path=str(log))
    sharing.share_with_user(w.a_member, w.job, w.guest)
    w.rotation = Rotation.objects.create(name="team-a-rota", tenant=w.tenant_a)
    RotationMember.objects.create(rotation=w.rotation, user=w.a_member, position=0)
    w.incident = oncall_services.report_incident(w.a_member, title="GPU lost on gpu-node-1", severity=2)
    w.follow_up = oncall_services.add_follow_up(w.incident, w.root, title="replace the GPU")
    _, w.a_token = account_services.issue_application_token(w.a_member)
    return w


def path_values(key, w):
    """Team A's object for each path parameter of the route `key`."""
    values = {
        "username": "a_member", "groupname": "team_a", "token": w.a_token, "slug": "team-a",
        "cluster_name": "local", "address": "rack-1", "attempt_index": 0, "task_role": "taskrole",
        "task_index": 0, "task_attempt_index": 0, "uidb64": "MQ", "action": "acknowledge",
        "path": "v2/no-such-route", "attempt": 0, "role": "taskrole", "index": 0,
    }
    if "/jobs/" in key or key.startswith("jobs/"):
        values["name"] = w.job.name
    elif "virtual-clusters" in key or key.startswith("vcs/"):
        values["name"] = "team_a"
    elif "storages" in key:
        values["name"] = "team-a-data"
    elif "cell-types" in key:
        values["name"] = "A100"
    elif "/nodes/" in key:
        values["name"] = "gpu-node-1"
    elif "clusters" in key:
        values["name"] = "local"
    if "incidents" in key:
        values["pk"] = w.incident.pk
    elif "rotations" in key:
        values["pk"] = w.rotation.pk
    elif "follow-ups" in key:
        values["pk"] = w.follow_up.pk
    if key.startswith("accounts/reset"):
        values["token"] = "set-password"
    return values


def _grouped(section):
    grouped = {}
    for key, route, pattern in routes.all_routes(section):
        entry = grouped.setdefault(key, {"routes": [], "methods": set()})
        entry["routes"].append(route)
        entry["methods"].update(routes.view_methods(pattern))
    return grouped


API_ROUTES = _grouped("api")
HTML_ROUTES = _grouped("html")


def _principal(w, name):
    return None if name == "anonymous" else getattr(w, name, None) or w.users()[name]


def _request(client, method, url, api):
    # Each request in a savepoint rolled back afterwards: a DELETE by one principal leaves the
    # object for the next. The matrix sends hundreds of requests a second as one user; the
    # throttles' counters are emptied first so a 429 never stands in for the answer under test.
    cache.clear()
    with transaction.atomic():
        if api:
            response = getattr(client, method)(url, {}, format="json") if method != "get" else client.get(url)
        else:
            response = getattr(client, method)(url)
        transaction.set_rollback(True)
    return response


def _statuses(w, key, entry, method, api, client_for):
    got = {}
    for name in PRINCIPALS:
        user = _principal(w, name)
        if api:
            client = APIClient() if user is None else client_for(user)
        else:
            client = Client()
            if user is not None:
                client.force_login(user)
        codes = set()
        for route in entry["routes"]:
            response = _request(client, method, routes.fill(route, path_values(key, w)), api)
            codes.add(response.status_code)
        assert len(codes) == 1, (key, method, name, "a route and its slash twin answer differently", codes)
        got[name] = codes.pop()
    return tuple(got[name] for name in PRINCIPALS)


def test_every_api_route_declares_its_rule():
    found = {(m.upper(), key) for key, entry in API_ROUTES.items() for m in entry["methods"]}
    assert sorted(found - set(API)) == [], "declare these API routes' rules in API"
    assert sorted(set(API) - found) == [], "these declared routes no longer exist"


def test_every_html_page_declares_its_rule():
    found = {(m.upper(), key) for key, entry in HTML_ROUTES.items() for m in entry["methods"]}
    assert sorted(found - set(HTML)) == [], "declare these pages' rules in HTML"
    assert sorted(set(HTML) - found) == [], "these declared pages no longer exist"


@pytest.mark.parametrize("key", sorted(API_ROUTES))
def test_api_route(matrix_world, client_for, key):
    entry = API_ROUTES[key]
    got = {
        (method.upper(), key): _statuses(matrix_world, key, entry, method, True, client_for)
        for method in sorted(entry["methods"])
    }
    assert not [row for row in got.values() if 500 in row], got
    assert {k: API.get(k) for k in got} == got, "OBSERVED " + "".join(f"\n    {k!r}: {v!r}," for k, v in got.items())


@pytest.mark.parametrize("key", sorted(HTML_ROUTES))
def test_html_page(matrix_world, client_for, key):
    entry = HTML_ROUTES[key]
    got = {
        (method.upper(), key): _statuses(matrix_world, key, entry, method, False, client_for)
        for method in sorted(entry["methods"])
    }
    assert not [row for row in got.values() if 500 in row], got
    assert {k: HTML.get(k) for k in got} == got, "OBSERVED " + "".join(f"\n    {k!r}: {v!r}," for k, v in got.items())


MISSING = {"username": "nobody", "groupname": "no_group", "token": "no-such-token", "slug": "no-team",
           "name": "no_such_thing", "pk": 987654, "attempt_index": 97, "task_index": 96, "task_attempt_index": 95,
           "attempt": 97, "index": 96}


def _hidden_from_b_member(table):
    b = PRINCIPALS.index("b_member")
    return sorted((method, key) for (method, key), row in table.items() if row[b] == 404 and "{" in key)


@pytest.mark.parametrize("section", ["api", "html"])
def test_hidden_objects_answer_as_missing_ones(matrix_world, client_for, section):
    """Where b_member gets 404 for Team A's object, a name that exists nowhere gets the very
    same answer (status and body, but for the name itself): the 404 says nothing of existence."""
    w = matrix_world
    api = section == "api"
    table, found = (API, API_ROUTES) if api else (HTML, HTML_ROUTES)
    if api:
        client = client_for(w.b_member)
    else:
        client = Client()
        client.force_login(w.b_member)
    checked = 0
    for method, key in _hidden_from_b_member(table):
        route = found[key]["routes"][0]
        real = path_values(key, w)
        missing = {**real, **{p: MISSING[p] for p in routes.params(route) if p in MISSING}}
        if "{username}~{name}" in key:
            missing["name"] = "no_such_job"
        shown = _request(client, method.lower(), routes.fill(route, real), api)
        unknown = _request(client, method.lower(), routes.fill(route, missing), api)
        assert shown.status_code == unknown.status_code == 404, (method, key)
        body = shown.content.decode()
        for param in routes.params(route):
            if isinstance(real[param], str):  # names echo back in messages; ids do not
                body = body.replace(real[param], str(missing[param]))
        assert body == unknown.content.decode(), (method, key)
        checked += 1
    assert checked >= (20 if api else 3)


def _admin_object(model, w):
    """Team A's row of `model` where the model has tenants, else any row; None when there is none."""
    if model is get_user_model():
        return w.a_member
    manager = model._default_manager
    if hasattr(manager, "manageable_by"):
        row = manager.manageable_by(w.a_admin).order_by("pk").first()
        if row is not None:
            return row
    return manager.order_by("pk").first()


def _admin_pages(model, model_admin, w):
    info = f"admin:{model._meta.app_label}_{model._meta.model_name}"
    obj = _admin_object(model, w)
    pages = {"changelist": reverse(f"{info}_changelist"), "add": reverse(f"{info}_add")}
    if obj is not None:
        pages["change"] = reverse(f"{info}_change", args=[obj.pk])
        if isinstance(model_admin, SharingAdminMixin):
            pages["permissions"] = reverse(f"{info}_permissions", args=[obj.pk])
    return pages


def test_every_admin_page_declares_its_rule():
    labels = {model._meta.label_lower for model in admin.site._registry}
    assert sorted(labels - set(ADMIN)) == [], "declare these admin pages' rules in ADMIN"
    assert sorted(set(ADMIN) - labels) == [], "these declared admin pages no longer exist"


@pytest.mark.parametrize("label", sorted(m._meta.label_lower for m in admin.site._registry))
def test_admin_pages(matrix_world, label):
    w = matrix_world
    model, model_admin = next((m, a) for m, a in admin.site._registry.items() if m._meta.label_lower == label)
    clients = {}
    for name in PRINCIPALS:
        clients[name] = Client()
        if name != "anonymous":
            clients[name].force_login(_principal(w, name))
    got = {
        page: tuple(clients[name].get(url).status_code for name in PRINCIPALS)
        for page, url in _admin_pages(model, model_admin, w).items()
    }
    assert ADMIN.get(label) == got, f"OBSERVED {label!r}: {got!r},"
