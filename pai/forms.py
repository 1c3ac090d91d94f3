"""Form fields shared by pai's admin pages.

`BoundedJSONField` is Django's JSON form field read through `pai.documents.load_json`:
a value nested deeper than any document has a reason to be is a field error, not the
RecursionError (a 500) that Python's JSON reader raises some thousands of levels down.
Every pai ModelAdmin uses it for JSON model fields (`JSON_FORMFIELD_OVERRIDES`).
"""

from django import forms
from django.db import models

from .documents import DocumentError, check_depth, load_json


class BoundedJSONField(forms.JSONField):
    def to_python(self, value):
        if self.disabled or value in self.empty_values or isinstance(value, (list, dict, int, float)):
            return super().to_python(value)
        try:
            load_json(value)
        except DocumentError as exc:
            raise forms.ValidationError(f"The value {exc}.", code="invalid") from None
        except ValueError:
            pass  # Django's own message for text that is not JSON
        return super().to_python(value)

    def bound_data(self, data, initial):
        try:
            if isinstance(data, str):
                check_depth(load_json(data))
        except (DocumentError, ValueError):
            return forms.fields.InvalidJSONInput(data)
        return super().bound_data(data, initial)


JSON_FORMFIELD_OVERRIDES = {models.JSONField: {"form_class": BoundedJSONField}}
