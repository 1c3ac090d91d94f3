"""guardian's object-permission pages in the admin, narrowed to pai's shares.

`SharingAdminMixin` adds guardian's "Object permissions" link and pages to a ModelAdmin,
with three differences from guardian's own mixin: only those who may share the object
(`apps.accounts.sharing.may_share`) open them, anyone else gets 404 whatever their other
admin rights; the only permission offered is the share (`view_<model>`); and every grant
or revoke goes through the audited services in `apps.accounts.sharing`.

The page of one user's or group's share is found by its id. It opens only for an account
or group the requester sees, one holding a share of the object, or one the requester
named on the object's page (kept in the session): walking the ids would otherwise name
every team's users and groups.
"""

from collections import OrderedDict

from django.contrib import messages
from django.contrib.admin.utils import unquote
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group as AuthGroup
from django.core.exceptions import ValidationError
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from guardian.admin import AdminGroupObjectPermissionsForm, AdminUserObjectPermissionsForm, GroupManage, UserManage
from guardian.admin import GuardedModelAdminMixin
from guardian.shortcuts import get_groups_with_perms, get_perms_for_model, get_users_with_perms

from . import sharing
from .models import Group
from .selectors import users_visible_to

# Session key: the users and groups ("user:<id>", "group:<id>") the requester named on a
# share page; the most recent few are kept.
_NAMED = "pai-share-named"
_NAMED_KEPT = 50


def _share_codename(model):
    return f"view_{model._meta.model_name}"


class _ShareFormMixin:
    """Offers the share permission only, and saves through the audited services."""

    actor = None

    def get_obj_perms_field_choices(self):
        return [(_share_codename(self.obj), f"Shared (may {self.share_verb})")]

    def get_obj_perms_field_label(self):
        return "Share"

    def _save(self, grant, revoke, target):
        wanted = bool(self.cleaned_data[self.get_obj_perms_field_name()])
        had = _share_codename(self.obj) in set(self.get_obj_perms_field_initial())
        try:
            if wanted and not had:
                grant(self.actor, self.obj, target)
            elif had and not wanted:
                revoke(self.actor, self.obj, target)
        except ValidationError as exc:
            self.add_error(self.get_obj_perms_field_name(), exc.messages)
            return False
        return True


class ShareWithUserForm(_ShareFormMixin, AdminUserObjectPermissionsForm):
    share_verb = "read it"

    def save_obj_perms(self):
        return self._save(sharing.share_with_user, sharing.unshare_with_user, self.user)


class ShareWithGroupForm(_ShareFormMixin, AdminGroupObjectPermissionsForm):
    share_verb = "see and use it"

    def save_obj_perms(self):
        return self._save(sharing.share_with_group, sharing.unshare_with_group, self.group)


class SharingAdminMixin(GuardedModelAdminMixin):
    change_form_template = "admin/sharing/change_form.html"

    def render_change_form(self, request, context, add=False, change=False, form_url="", obj=None):
        context["may_share"] = obj is not None and sharing.may_share(request.user, obj)
        return super().render_change_form(request, context, add=add, change=change, form_url=form_url, obj=obj)

    def _shares_with_users(self):
        return self.model._meta.label_lower in sharing.SHARED_WITH_USERS

    def _shared_object(self, request, object_pk):
        """The object, if the requester may share it; 404 otherwise (its existence does not leak)."""
        obj = get_object_or_404(self.get_queryset(request), pk=unquote(object_pk))
        if not sharing.may_share(request.user, obj):
            raise Http404
        return obj

    def get_obj_perms_base_context(self, request, obj):
        context = super().get_obj_perms_base_context(request, obj)
        context["model_perms"] = get_perms_for_model(obj).filter(codename=_share_codename(obj))
        return context

    def _url(self, kind, *args):
        info = (self.admin_site.name, self.model._meta.app_label, self.model._meta.model_name)
        return reverse("%s:%s_%s_permissions%s" % (*info, kind), args=args)

    def obj_perms_manage_view(self, request, object_pk):
        obj = self._shared_object(request, object_pk)
        data = request.POST if request.method == "POST" else None
        user_form, group_form = UserManage(data), GroupManage(data)
        if request.method == "POST":
            picked_user = "submit_manage_user" in request.POST
            form = user_form if picked_user else group_form
            if form.is_valid() and picked_user != self._shares_with_users():
                form.add_error("user" if picked_user else "group", f"A {obj._meta.verbose_name} is shared with "
                               f"{'users' if self._shares_with_users() else 'groups'} only.")
            elif form.is_valid():
                kind = "user" if picked_user else "group"
                target = form.cleaned_data[kind]
                named = [key for key in request.session.get(_NAMED, []) if key != f"{kind}:{target.pk}"]
                request.session[_NAMED] = [*named, f"{kind}:{target.pk}"][-_NAMED_KEPT:]
                return redirect(self._url(f"_manage_{kind}", obj.pk, target.pk))
        context = self.get_obj_perms_base_context(request, obj)
        users = get_users_with_perms(obj, attach_perms=True, with_group_users=False)
        groups = get_groups_with_perms(obj, attach_perms=True)
        context.update({
            "users_perms": OrderedDict(sorted(users.items(), key=lambda item: item[0].get_username())),
            "groups_perms": OrderedDict(sorted(groups.items(), key=lambda item: item[0].name)),
            "user_form": user_form,
            "group_form": group_form,
        })
        request.current_app = self.admin_site.name
        return render(request, self.get_obj_perms_manage_template(), context)

    def _manage(self, request, obj, target, form_class, template, context_key):
        form_class = type(form_class.__name__, (form_class,), {"actor": request.user})
        form = form_class(target, obj, request.POST if request.method == "POST" else None)
        if request.method == "POST" and form.is_valid():
            if form.save_obj_perms():
                messages.success(request, "Shares saved.")
                return redirect(request.path)
        context = self.get_obj_perms_base_context(request, obj)
        context.update({f"{context_key}_obj": target, f"{context_key}_perms": form.get_obj_perms_field_initial(),
                        "form": form})
        request.current_app = self.admin_site.name
        return render(request, template, context)

    @staticmethod
    def _named(request, kind, target):
        return f"{kind}:{target.pk}" in request.session.get(_NAMED, [])

    def obj_perms_manage_user_view(self, request, object_pk, user_id):
        obj = self._shared_object(request, object_pk)
        if not self._shares_with_users():
            raise Http404
        user = get_object_or_404(get_user_model(), pk=user_id)
        if not (users_visible_to(request.user).filter(pk=user.pk).exists()
                or obj.user_shares.filter(user=user).exists() or self._named(request, "user", user)):
            raise Http404
        return self._manage(request, obj, user, ShareWithUserForm, self.get_obj_perms_manage_user_template(), "user")

    def obj_perms_manage_group_view(self, request, object_pk, group_id):
        obj = self._shared_object(request, object_pk)
        if self._shares_with_users():
            raise Http404
        group = get_object_or_404(AuthGroup, pk=group_id)
        if not (Group.objects.visible_to(request.user).filter(pk=group.pk).exists()
                or obj.group_shares.filter(group=group).exists() or self._named(request, "group", group)):
            raise Http404
        return self._manage(request, obj, group, ShareWithGroupForm, self.get_obj_perms_manage_group_template(),
                            "group")
