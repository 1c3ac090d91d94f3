"""Roles in templates: `{% load portal_roles %}{% if user|is_platform_admin %}`."""

from django import template

from apps.accounts import roles

register = template.Library()


@register.filter
def is_platform_admin(user):
    return roles.is_platform_admin(user)
