from .alert import Alert, AlertRoute
from .calendar import Holiday, MonitoringCalendar
from .incident import FollowUp, Incident, TimelineEntry
from .notification import ChatWebhook, Notification
from .rotation import Rotation, RotationMember, RotationOverride
from .sla import SlaPolicy
from .tracker import GitHubRepository

__all__ = [
    "Alert",
    "AlertRoute",
    "ChatWebhook",
    "FollowUp",
    "GitHubRepository",
    "Holiday",
    "Incident",
    "MonitoringCalendar",
    "Notification",
    "Rotation",
    "RotationMember",
    "RotationOverride",
    "SlaPolicy",
    "TimelineEntry",
]
