from django import forms

from .models import Membership
from .services import MAX_CSV_ROWS, onboardable_groups, vc_granting_groups


class GroupChoiceField(forms.ModelMultipleChoiceField):
    """The tenant's groups, each labelled with the virtual clusters it grants."""

    def __init__(self, *args, **kwargs):
        self.granting = {}
        super().__init__(*args, **kwargs)

    def label_from_instance(self, group):
        vcs = self.granting.get(group.name)
        return f"{group.name} — submits to {', '.join(vcs)}" if vcs else f"{group.name} — grants no virtual cluster"


class OnboardUserForm(forms.Form):
    username = forms.CharField(max_length=150)
    email = forms.EmailField()
    first_name = forms.CharField(max_length=150, required=False)
    last_name = forms.CharField(max_length=150, required=False)
    role = forms.ChoiceField(choices=Membership.Role.choices, initial=Membership.Role.MEMBER)
    groups = GroupChoiceField(queryset=None, required=False, widget=forms.CheckboxSelectMultiple)
    without_vc = forms.BooleanField(
        required=False,
        label="Onboard without a virtual cluster",
        help_text="Tick to onboard someone who cannot submit jobs yet (no chosen group grants a virtual cluster).",
    )

    def __init__(self, *args, tenant, **kwargs):
        super().__init__(*args, **kwargs)
        field = self.fields["groups"]
        field.queryset = onboardable_groups(tenant)
        field.granting = vc_granting_groups(tenant)
        if len(field.granting) == 1:
            # The team's one group that grants a VC: what nearly every new member needs.
            field.initial = list(field.queryset.filter(name__in=field.granting))

    def clean(self):
        data = super().clean()
        chosen = data.get("groups")
        if chosen is not None and not data.get("without_vc"):
            if not any(g.name in self.fields["groups"].granting for g in chosen):
                self.add_error(
                    "groups",
                    "None of the chosen groups grants a virtual cluster: this user could not submit jobs anywhere. "
                    "Choose a group that does, or tick “Onboard without a virtual cluster”.",
                )
        return data


class BulkOnboardForm(forms.Form):
    csv_file = forms.FileField(
        label="CSV file",
        help_text=f"Columns: username,email,groups[,role,first_name,last_name]; several groups separated "
        f"by ';'. A header row is optional. At most {MAX_CSV_ROWS} rows; any bad row refuses the whole file. "
        "Members in no group that grants a virtual cluster are named after the upload.",
    )

    def clean_csv_file(self):
        upload = self.cleaned_data["csv_file"]
        if upload.size > 2 * 1024 * 1024:
            raise forms.ValidationError("The file is larger than 2 MB.")
        try:
            return upload.read().decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise forms.ValidationError("The file is not UTF-8 text.") from exc
