from django import forms

from .models import Membership
from .services import MAX_CSV_ROWS, onboardable_groups


class OnboardUserForm(forms.Form):
    username = forms.CharField(max_length=150)
    email = forms.EmailField()
    first_name = forms.CharField(max_length=150, required=False)
    last_name = forms.CharField(max_length=150, required=False)
    role = forms.ChoiceField(choices=Membership.Role.choices, initial=Membership.Role.MEMBER)
    groups = forms.ModelMultipleChoiceField(queryset=None, required=False, widget=forms.CheckboxSelectMultiple)

    def __init__(self, *args, tenant, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["groups"].queryset = onboardable_groups(tenant)


class BulkOnboardForm(forms.Form):
    csv_file = forms.FileField(
        label="CSV file",
        help_text=f"Columns: username,email,groups[,role,first_name,last_name]; several groups separated "
        f"by ';'. A header row is optional. At most {MAX_CSV_ROWS} rows; any bad row refuses the whole file.",
    )

    def clean_csv_file(self):
        upload = self.cleaned_data["csv_file"]
        if upload.size > 2 * 1024 * 1024:
            raise forms.ValidationError("The file is larger than 2 MB.")
        try:
            return upload.read().decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise forms.ValidationError("The file is not UTF-8 text.") from exc
