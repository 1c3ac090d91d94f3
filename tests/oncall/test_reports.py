"""SLA figures: MTTA, MTTR and breach rate per severity, cluster class, DRI and week."""

from datetime import datetime, timedelta, timezone

from apps.oncall import reports, services
from apps.oncall.choices import IncidentSource
from apps.oncall.models import Incident

UTC = timezone.utc
MONDAY = datetime(2026, 1, 5, 11, 0, tzinfo=UTC)


def handled(world, severity, opened, ack_after, resolve_after, who, cluster=True):
    incident = services.open_incident(title=f"sev {severity}", severity=severity, source=IncidentSource.ALERT,
                                      cluster=world.cluster if cluster else None, now=opened)
    services.run_sla_sweep(opened + ack_after - timedelta(seconds=1))  # the minutely sweep, just before the ack
    services.acknowledge(incident, who, now=opened + ack_after)
    services.resolve(incident, who, now=opened + resolve_after)
    return incident


def test_figures_per_grouping(oncall):
    handled(oncall, 1, MONDAY, timedelta(minutes=10), timedelta(hours=1), oncall.alice)
    handled(oncall, 1, MONDAY + timedelta(days=7), timedelta(minutes=50), timedelta(hours=3), oncall.bob)
    handled(oncall, 3, MONDAY, timedelta(minutes=5), timedelta(hours=2), oncall.alice, cluster=False)
    # The second sev-1 was acknowledged after its 30-minute deadline: the sweep marked it.
    assert Incident.objects.get(triggered_at=MONDAY + timedelta(days=7)).ack_breached_at is not None

    report = reports.sla_report(Incident.objects.select_related("acknowledged_by"))
    by = {grouping: {row["label"]: row for row in rows} for grouping, rows in report.items()}
    assert by["severity"]["Sev 1"] == {"label": "Sev 1", "count": 2, "mtta": 30.0, "mttr": 120.0,
                                      "mtta_monitoring": 30.0, "mttr_monitoring": 120.0, "breach_rate": 50.0}
    assert by["severity"]["Sev 3"]["mtta"] == 5.0 and by["severity"]["Sev 3"]["breach_rate"] == 0.0
    assert list(by["severity"]) == ["Sev 1", "Sev 3"]
    assert by["cluster_class"]["Production"]["count"] == 2 and by["cluster_class"]["No cluster"]["count"] == 1
    assert by["dri"]["alice"]["mtta"] == 7.5 and by["dri"]["bob"]["breach_rate"] == 100.0
    assert set(by["week"]) == {"2026-W02", "2026-W03"}


def test_bar_chart_scales_to_the_largest_value():
    rows = [{"label": "a", "m": 10.0}, {"label": "b", "m": 40.0}, {"label": "c", "m": None}]
    chart = reports.bar_chart(rows, "m", width=360, label_width=130, bar_height=18, gap=6)
    widths = [bar["width"] for bar in chart["bars"]]
    assert widths == [42, 170, 0]  # span = 360 - 130 - 60
    assert chart["height"] == 3 * 24
