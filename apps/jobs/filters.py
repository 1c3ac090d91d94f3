"""The job list's OpenPAI query parameters, as a django-filter FilterSet.

OpenPAI takes comma-separated lists (`state=RUNNING,WAITING`), a `keyword` matched in
the user, job and VC names, tag filters, and `order=<field>,ASC|DESC`.
"""

import django_filters
from django import forms
from django.contrib.auth import get_user_model
from django.db.models import Exists, OuterRef, Q

from apps.virtualclusters.models import VirtualCluster

from .choices import JobState
from .models import Job, JobTag
from .protocol.structure import storable_text

# OpenPAI's order fields → model fields.
ORDER_FIELDS = {
    "jobName": "name",
    "submissionTime": "submitted_at",
    "username": "owner__username",
    "vc": "virtual_cluster__name",
    "retries": "retries",
    "totalTaskNumber": "total_tasks",
    "totalGpuNumber": "total_gpu",
    "state": "state",
    "completionTime": "completed_at",
}


class CommaListField(forms.CharField):
    def to_python(self, value):
        value = super().to_python(value)
        if value and not storable_text(value):
            raise forms.ValidationError("must be text without NUL characters or lone surrogates")
        return [item.strip() for item in value.split(",") if item.strip()] if value else []


class CommaListFilter(django_filters.Filter):
    field_class = CommaListField


class StateListField(CommaListField):
    def to_python(self, value):
        states = super().to_python(value)
        unknown = [state for state in states if state not in JobState.values]
        if unknown:
            raise forms.ValidationError(f"unknown state {', '.join(unknown)}; use {', '.join(JobState.values)}")
        return states


class StateListFilter(CommaListFilter):
    field_class = StateListField


class OrderField(forms.CharField):
    def to_python(self, value):
        value = super().to_python(value)
        if not value:
            return None
        if not storable_text(value):
            raise forms.ValidationError("must be text without NUL characters or lone surrogates")
        field, _, direction = value.partition(",")
        direction = (direction or "ASC").upper()
        if field not in ORDER_FIELDS:
            raise forms.ValidationError(f"must be <field>,ASC|DESC with field one of {', '.join(ORDER_FIELDS)}")
        if direction not in ("ASC", "DESC"):
            raise forms.ValidationError("the direction must be ASC or DESC")
        return field, direction


class OrderFilter(django_filters.Filter):
    field_class = OrderField

    def filter(self, qs, value):
        if not value:
            return qs
        field, direction = value
        column = ORDER_FIELDS[field]
        sign = "-" if direction == "DESC" else ""
        return qs.order_by(f"{sign}{column}", f"{sign}id")


# Beyond this many users (or VCs) matching a keyword, they stay a subquery.
MAX_KEYWORD_IDS = 1000


def _ids(queryset):
    return list(queryset.values_list("pk", flat=True))


class JobFilterSet(django_filters.FilterSet):
    username = CommaListFilter(method="filter_username")
    vc = CommaListFilter(method="filter_vc")
    state = StateListFilter(method="filter_state")
    keyword = django_filters.CharFilter(method="filter_keyword", max_length=255)
    tagsContain = CommaListFilter(method="filter_tags_contain")
    tagsNotContain = CommaListFilter(method="filter_tags_not_contain")
    order = OrderFilter()

    class Meta:
        model = Job
        fields = []

    # The names are resolved to ids first (one small query): with the ids as literals,
    # PostgreSQL estimates from the column's statistics and reads the owner's (or VC's)
    # index, instead of walking every visible job in submission order looking for them,
    # which took 100+ ms over 100,000 jobs when the user had few or old jobs.
    def filter_username(self, qs, name, value):
        return qs.filter(owner_id__in=_ids(get_user_model().objects.filter(username__in=value))) if value else qs

    def filter_vc(self, qs, name, value):
        return qs.filter(virtual_cluster_id__in=_ids(VirtualCluster.objects.filter(name__in=value))) if value else qs

    def filter_state(self, qs, name, value):
        return qs.filter(state__in=value) if value else qs

    def filter_keyword(self, qs, name, value):
        if not value:
            return qs
        # Owners and VCs matching the keyword are looked up first on their own small tables
        # (ids as literals, an empty list drops its branch): PostgreSQL then reads the job
        # names through their trigram index (migration 0015) and the owners' index, where
        # subqueries made it walk every job in submission order testing each one.
        owners = _ids(get_user_model().objects.filter(username__icontains=value)[:MAX_KEYWORD_IDS + 1])
        vcs = _ids(VirtualCluster.objects.filter(name__icontains=value)[:MAX_KEYWORD_IDS + 1])
        condition = Q(name__icontains=value)
        if owners:
            condition |= Q(owner_id__in=owners) if len(owners) <= MAX_KEYWORD_IDS else Q(
                owner_id__in=get_user_model().objects.filter(username__icontains=value).values("pk"))
        if vcs:
            condition |= Q(virtual_cluster_id__in=vcs) if len(vcs) <= MAX_KEYWORD_IDS else Q(
                virtual_cluster_id__in=VirtualCluster.objects.filter(name__icontains=value).values("pk"))
        return qs.filter(condition)

    def filter_tags_contain(self, qs, name, value):
        if not value:
            return qs
        return qs.filter(Exists(JobTag.objects.filter(job=OuterRef("pk"), name__in=value)))

    def filter_tags_not_contain(self, qs, name, value):
        if not value:
            return qs
        return qs.filter(~Exists(JobTag.objects.filter(job=OuterRef("pk"), name__in=value)))
