from rest_framework import serializers

from apps.tenants.models import Tenant


class TenantSerializer(serializers.ModelSerializer):
    class Meta:
        model = Tenant
        fields = [
            "slug", "name", "description", "contact_email", "job_retention_days", "idle_gpu_threshold_percent",
            "idle_gpu_hours", "idle_gpu_action", "idle_gpu_grace_hours", "created_at",
        ]
