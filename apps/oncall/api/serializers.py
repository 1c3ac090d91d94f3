from django.contrib.auth import get_user_model
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.clusters.models import Cluster

from ..choices import Severity
from ..models import Alert, FollowUp, Incident, Rotation, TimelineEntry

User = get_user_model()


class NameField(serializers.SlugRelatedField):
    """A reference by name that refuses NUL characters before the lookup: PostgreSQL
    cannot compare text containing them and would fail the request with a 500."""

    def to_internal_value(self, data):
        if isinstance(data, str) and "\x00" in data:
            raise serializers.ValidationError("Null characters are not allowed.")
        return super().to_internal_value(data)


class UserRefSerializer(serializers.ModelSerializer):
    class Meta:
        model = User
        fields = ["username", "email"]


class TimelineEntrySerializer(serializers.ModelSerializer):
    actor = serializers.CharField(source="actor_name")

    class Meta:
        model = TimelineEntry
        fields = ["id", "created_at", "actor", "kind", "from_status", "to_status", "message", "data"]


class FollowUpSerializer(serializers.ModelSerializer):
    owner = NameField(slug_field="username", queryset=User.objects.all(), allow_null=True, required=False)

    class Meta:
        model = FollowUp
        fields = ["id", "title", "owner", "due_date", "link", "done", "done_at", "issue_url", "issue_number",
                  "issue_state", "issue_error"]
        read_only_fields = ["id", "done", "done_at", "issue_url", "issue_number", "issue_state", "issue_error"]


class SlaClockSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=["ack", "update"])
    deadline = serializers.DateTimeField()
    seconds_left = serializers.IntegerField(help_text="Monitoring-hours time left.")
    running = serializers.BooleanField(help_text="Whether the SLA clock runs now (inside monitoring hours).")
    overdue = serializers.BooleanField()


class IncidentSerializer(serializers.ModelSerializer):
    cluster = serializers.SlugRelatedField(slug_field="name", read_only=True, allow_null=True)
    reporter = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    acknowledged_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    assignees = serializers.SlugRelatedField(slug_field="username", many=True, read_only=True)
    rotation = serializers.SlugRelatedField(slug_field="name", read_only=True, allow_null=True)
    proposed_severity = serializers.IntegerField(read_only=True, allow_null=True)
    sla_policy = serializers.SerializerMethodField()
    sla_clock = serializers.SerializerMethodField()

    class Meta:
        model = Incident
        fields = [
            "id", "title", "description", "severity", "proposed_severity", "severity_confirmed", "cluster",
            "cluster_class", "source", "status", "reporter", "assignees", "rotation", "triggered_at",
            "acknowledged_at", "acknowledged_by", "mitigated_at", "resolved_at", "closed_at", "last_update_at",
            "sla_policy", "ack_deadline", "next_update_deadline", "ack_breached_at", "update_breaches", "sla_clock",
            "cause", "prevention", "reviewed_at",
        ]

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_sla_policy(self, obj):
        return obj.sla["name"] if obj.sla else None

    @extend_schema_field(SlaClockSerializer(allow_null=True))
    def get_sla_clock(self, obj):
        return obj.countdown()


class IncidentDetailSerializer(IncidentSerializer):
    timeline = TimelineEntrySerializer(many=True, read_only=True)
    follow_ups = FollowUpSerializer(many=True, read_only=True)

    class Meta(IncidentSerializer.Meta):
        fields = IncidentSerializer.Meta.fields + ["timeline", "follow_ups"]


class IncidentCreateSerializer(serializers.Serializer):
    title = serializers.CharField(max_length=200)
    description = serializers.CharField(required=False, allow_blank=True, default="")
    severity = serializers.ChoiceField(
        choices=Severity.choices, help_text="A user's severity is a proposal that a DRI confirms."
    )
    cluster = NameField(slug_field="name", queryset=Cluster.objects.all(), required=False, allow_null=True)


class IncidentNoteSerializer(serializers.Serializer):
    message = serializers.CharField(required=False, allow_blank=True, default="")


class IncidentUpdateSerializer(serializers.Serializer):
    message = serializers.CharField()


class SeverityConfirmSerializer(serializers.Serializer):
    severity = serializers.ChoiceField(choices=Severity.choices)


class IncidentReviewSerializer(serializers.Serializer):
    cause = serializers.CharField()
    prevention = serializers.CharField()
    follow_ups = FollowUpSerializer(many=True, required=False, default=list)


class ShiftSerializer(serializers.Serializer):
    index = serializers.IntegerField()
    starts_at = serializers.DateTimeField()
    ends_at = serializers.DateTimeField()
    scheduled = serializers.SerializerMethodField()
    overrides = serializers.SerializerMethodField()

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_scheduled(self, shift):
        return [u.get_username() for u in shift["scheduled"]]

    @extend_schema_field(serializers.ListField(child=serializers.DictField()))
    def get_overrides(self, shift):
        return [
            {"user": o.user.get_username(), "replaces": o.replaces.get_username(),
             "starts_at": o.starts_at, "ends_at": o.ends_at, "reason": o.reason}
            for o in shift["overrides"]
        ]


class RotationSerializer(serializers.ModelSerializer):
    tenant = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    members = serializers.SerializerMethodField()

    class Meta:
        model = Rotation
        fields = [
            "id", "name", "tenant", "description", "timezone", "start_date", "handoff_weekday", "handoff_time",
            "shift_days", "dris_per_shift", "active", "members",
        ]

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_members(self, rotation):
        return [m.user.get_username() for m in rotation.members.all()]


class OverrideSerializer(serializers.Serializer):
    user = NameField(slug_field="username", queryset=User.objects.filter(is_active=True),
                                        help_text="Who takes the shift.")
    replaces = NameField(slug_field="username", queryset=User.objects.all(),
                                            help_text="The scheduled DRI who is covered for.")
    starts_at = serializers.DateTimeField()
    ends_at = serializers.DateTimeField()
    reason = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")


class OverrideReadSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    user = serializers.CharField(source="user.username")
    replaces = serializers.CharField(source="replaces.username")
    starts_at = serializers.DateTimeField()
    ends_at = serializers.DateTimeField()
    reason = serializers.CharField()


class SwapSerializer(serializers.Serializer):
    first_index = serializers.IntegerField(min_value=0, help_text="A shift index, as `shifts` lists them.")
    first_user = NameField(slug_field="username", queryset=User.objects.all())
    second_index = serializers.IntegerField(min_value=0)
    second_user = NameField(slug_field="username", queryset=User.objects.filter(is_active=True))


class OnCallNowSerializer(serializers.Serializer):
    rotation = serializers.CharField()
    tenant = serializers.CharField(allow_null=True)
    dris = UserRefSerializer(many=True)


class FairShareSerializer(serializers.Serializer):
    username = serializers.CharField()
    shifts = serializers.IntegerField()
    hours = serializers.FloatField()


class AlertSerializer(serializers.ModelSerializer):
    """Alertmanager's API v2 alert shape, which OpenPAI's `GET /api/v2/alerts` passes through."""

    startsAt = serializers.DateTimeField(source="starts_at")
    endsAt = serializers.DateTimeField(source="ends_at")
    updatedAt = serializers.DateTimeField(source="last_seen")
    generatorURL = serializers.CharField(source="generator_url")
    status = serializers.SerializerMethodField()
    receivers = serializers.SerializerMethodField()
    incident = serializers.IntegerField(source="incident_id")

    class Meta:
        model = Alert
        fields = ["labels", "annotations", "startsAt", "endsAt", "updatedAt", "generatorURL", "fingerprint",
                  "status", "receivers", "incident"]

    @extend_schema_field(serializers.DictField())
    def get_status(self, alert):
        return {"state": "active" if alert.status == "firing" else "unprocessed", "silencedBy": [], "inhibitedBy": []}

    @extend_schema_field(serializers.ListField(child=serializers.DictField()))
    def get_receivers(self, alert):
        return [{"name": alert.receiver}] if alert.receiver else []


class WebhookResultSerializer(serializers.Serializer):
    incident = serializers.IntegerField(allow_null=True)
    status = serializers.CharField(allow_null=True)
    rejected = serializers.ListField(
        child=serializers.CharField(), help_text="Alerts of the delivery that were not kept, and why (`path: reason`)."
    )
