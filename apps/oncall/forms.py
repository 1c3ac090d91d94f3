from django import forms
from django.contrib.auth import get_user_model

from apps.clusters.choices import ClusterClass
from apps.clusters.models import Cluster

# Severity choices carry their meaning in the label, so the radio buttons explain themselves.
from .choices import IncidentSource, IncidentStatus, Severity

User = get_user_model()


class IncidentReportForm(forms.Form):
    title = forms.CharField(max_length=200)
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 5}), required=False)
    severity = forms.TypedChoiceField(
        choices=Severity.choices, coerce=int, widget=forms.RadioSelect, initial=Severity.SEV2,
        help_text="Your proposal; the DRI on call confirms it.",
    )
    cluster = forms.ModelChoiceField(queryset=Cluster.objects.all(), required=False, empty_label="(no particular cluster)")


class UpdateForm(forms.Form):
    message = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}))


class NoteForm(forms.Form):
    message = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False)


class SeverityForm(forms.Form):
    severity = forms.TypedChoiceField(choices=Severity.choices, coerce=int, widget=forms.RadioSelect)


class ReviewForm(forms.Form):
    cause = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), help_text="Why it happened.")
    prevention = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), help_text="How to avoid it.")
    follow_up_title = forms.CharField(max_length=200, required=False, label="Follow-up")
    follow_up_owner = forms.ModelChoiceField(
        queryset=User.objects.filter(is_active=True).order_by("username"), required=False, label="Owner",
        to_field_name="username",
    )
    follow_up_due = forms.DateField(required=False, label="Due", widget=forms.DateInput(attrs={"type": "date"}))
    follow_up_link = forms.URLField(required=False, label="Tracker link", assume_scheme="https")

    def __init__(self, *args, rotation=None, **kwargs):
        super().__init__(*args, **kwargs)
        from .services import responders_of

        self.fields["follow_up_owner"].queryset = responders_of(rotation).order_by("username")

    def clean(self):
        data = super().clean()
        extras = [data.get(f) for f in ("follow_up_owner", "follow_up_due", "follow_up_link")]
        if any(extras) and not data.get("follow_up_title"):
            self.add_error("follow_up_title", "Give the follow-up a title.")
        return data

    def follow_ups(self):
        data = self.cleaned_data
        if not data.get("follow_up_title"):
            return []
        return [{
            "title": data["follow_up_title"], "owner": data.get("follow_up_owner"),
            "due_date": data.get("follow_up_due"), "link": data.get("follow_up_link") or "",
        }]


class IncidentFilterForm(forms.Form):
    status = forms.ChoiceField(choices=[("", "Open"), ("all", "All")] + list(IncidentStatus.choices), required=False)
    severity = forms.ChoiceField(choices=[("", "Any severity")] + [(v, f"Sev {v}") for v in Severity.values], required=False)
    cluster_class = forms.ChoiceField(choices=[("", "Any cluster class")] + list(ClusterClass.choices), required=False)
    source = forms.ChoiceField(choices=[("", "Any source")] + list(IncidentSource.choices), required=False)


class OverrideForm(forms.Form):
    user = forms.ModelChoiceField(queryset=User.objects.filter(is_active=True).order_by("username"),
                                  to_field_name="username", label="Who covers")
    replaces = forms.ModelChoiceField(queryset=User.objects.order_by("username"), to_field_name="username",
                                      label="For whom")
    starts_at = forms.DateTimeField(label="From", widget=forms.DateTimeInput(attrs={"type": "datetime-local"}))
    ends_at = forms.DateTimeField(label="To", widget=forms.DateTimeInput(attrs={"type": "datetime-local"}))
    reason = forms.CharField(max_length=200, required=False)

    def __init__(self, *args, rotation=None, **kwargs):
        super().__init__(*args, **kwargs)
        if rotation is not None:
            from .services import responders_of

            members = User.objects.filter(rotation_memberships__rotation=rotation).order_by("username")
            self.fields["replaces"].queryset = members
            self.fields["user"].queryset = responders_of(rotation).order_by("username")
