"""SLA figures for the dashboard: MTTA, MTTR and breach rate, grouped several ways."""

from collections import defaultdict
from datetime import timedelta

from django.utils import timezone

from apps.clusters.choices import ClusterClass

from .choices import Severity

GROUPINGS = [
    ("severity", "Severity", "By severity"),
    ("cluster_class", "Cluster class", "By cluster class"),
    ("dri", "DRI", "By DRI (who acknowledged)"),
    ("week", "Week", "By week opened"),
]


def _key(incident, grouping):
    if grouping == "severity":
        return f"Sev {incident.severity}"
    if grouping == "cluster_class":
        return ClusterClass(incident.cluster_class).label if incident.cluster_class else "No cluster"
    if grouping == "dri":
        return incident.acknowledged_by.get_username() if incident.acknowledged_by else "(not acknowledged)"
    year, week, _ = timezone.localtime(incident.triggered_at).isocalendar()
    return f"{year}-W{week:02d}"


def _minutes(deltas):
    return round(sum(d.total_seconds() for d in deltas) / 60 / len(deltas), 1) if deltas else None


def sla_report(incidents):
    """{grouping: [{label, count, mtta, mttr, mtta_monitoring, mttr_monitoring, breach_rate}]}: minutes
    (wall clock, and monitoring hours as the SLA clock counts them) and percent."""
    incidents = list(incidents)
    report = {}
    for grouping, _, _ in GROUPINGS:
        buckets = defaultdict(list)
        for incident in incidents:
            buckets[_key(incident, grouping)].append(incident)
        if grouping == "severity":
            order = [f"Sev {v}" for v in Severity.values]
        else:
            order = sorted(buckets)
        rows = []
        for label in order:
            group = buckets.get(label, [])
            if not group:
                continue
            acked = [i.acknowledged_at - i.triggered_at for i in group if i.acknowledged_at]
            resolved = [i.resolved_at - i.triggered_at for i in group if i.resolved_at]
            # The same spans counted as the SLA clock counts them: inside the incident's monitoring hours.
            acked_sla = [i.sla_calendar().elapsed(i.triggered_at, i.acknowledged_at) for i in group
                         if i.acknowledged_at and i.sla]
            resolved_sla = [i.sla_calendar().elapsed(i.triggered_at, i.resolved_at) for i in group
                            if i.resolved_at and i.sla]
            with_sla = [i for i in group if i.sla]
            breached = sum(1 for i in with_sla if i.breached)
            rows.append({
                "label": label,
                "count": len(group),
                "mtta": _minutes(acked),
                "mttr": _minutes(resolved),
                "mtta_monitoring": _minutes(acked_sla),
                "mttr_monitoring": _minutes(resolved_sla),
                "breach_rate": round(100 * breached / len(with_sla), 1) if with_sla else None,
            })
        report[grouping] = rows
    return report


def bar_chart(rows, metric, *, width=360, bar_height=22, gap=8, label_width=150):
    """Geometry for an inline SVG bar chart of one metric: no script, no external assets."""
    values = [r[metric] for r in rows if r[metric] is not None]
    top = max(values) if values else 0
    span = width - label_width - 60
    bars = []
    for index, row in enumerate(rows):
        value = row[metric]
        length = 0 if not top or value is None else max(1, round(span * value / top))
        y = index * (bar_height + gap)
        bars.append({
            "label": row["label"], "value": value, "y": y, "text_y": y + bar_height - 5,
            "x": label_width, "width": length, "value_x": label_width + length + 4,
        })
    return {
        "bars": bars, "width": width, "height": max(1, len(rows)) * (bar_height + gap),
        "bar_height": bar_height, "label_width": label_width,
    }


def default_period(now=None, weeks=12):
    now = now or timezone.now()
    return now - timedelta(weeks=weeks), now
