import django_filters

from apps.clusters.choices import ClusterClass

from .choices import OPEN_STATUSES, IncidentSource, IncidentStatus, Severity
from .models import Incident


class IncidentFilter(django_filters.FilterSet):
    status = django_filters.MultipleChoiceFilter(choices=IncidentStatus.choices)
    severity = django_filters.MultipleChoiceFilter(choices=Severity.choices)
    source = django_filters.ChoiceFilter(choices=IncidentSource.choices)
    cluster = django_filters.CharFilter(field_name="cluster__name")
    cluster_class = django_filters.ChoiceFilter(choices=ClusterClass.choices)
    open = django_filters.BooleanFilter(method="filter_open", label="Open (triggered, acknowledged or mitigated)")
    breached = django_filters.BooleanFilter(method="filter_breached", label="Missed an SLA deadline")

    class Meta:
        model = Incident
        fields = ["status", "severity", "source", "cluster", "cluster_class", "open", "breached"]

    def filter_open(self, queryset, name, value):
        if value is None:
            return queryset
        return queryset.filter(status__in=OPEN_STATUSES) if value else queryset.exclude(status__in=OPEN_STATUSES)

    def filter_breached(self, queryset, name, value):
        if value is None:
            return queryset
        breached = django_filters.filters.Q(ack_breached_at__isnull=False) | django_filters.filters.Q(update_breaches__gt=0)
        return queryset.filter(breached) if value else queryset.exclude(breached)
