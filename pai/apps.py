from django.contrib.admin.apps import AdminConfig


class PaiAdminConfig(AdminConfig):
    default_site = "pai.admin.PaiAdminSite"
