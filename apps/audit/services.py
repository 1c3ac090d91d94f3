"""Writing the audit log. Every service action calls `record` inside its transaction."""

import contextlib
import contextvars

from .models import AuditEntry

# Set while a service writes its own, richer row for what a signal would also audit.
_recorded_by_service = contextvars.ContextVar("pai_audit_recorded_by_service", default=frozenset())

# Keys never written to an audit diff, whatever model they come from.
SECRET_KEYS = frozenset({"password", "secret", "secrets", "token", "auth", "client_secret"})


def scrub(changes):
    if isinstance(changes, dict):
        return {k: ("******" if k.lower() in SECRET_KEYS else scrub(v)) for k, v in changes.items()}
    if isinstance(changes, list):
        return [scrub(v) for v in changes]
    return changes


def entry(actor, action, obj=None, *, tenant=None, changes=None, object_type=None, object_id=None, object_repr=None):
    """An unsaved audit row (for `bulk_create` by actions that change many objects at once)."""
    tenant_id = tenant.pk if tenant is not None else None
    if obj is not None:
        object_type = object_type or obj._meta.label_lower
        object_id = object_id if object_id is not None else str(obj.pk)
        object_repr = object_repr or str(obj)[:255]
        if tenant is None:
            # The column when the object has one: no query for a tenant not loaded.
            tenant_id = getattr(obj, "tenant_id", None)
            if tenant_id is None:
                tenant_id = getattr(getattr(obj, "tenant", None), "pk", None)
    authenticated = actor is not None and getattr(actor, "is_authenticated", False)
    return AuditEntry(
        actor=actor if authenticated else None,
        actor_name=actor.get_username() if authenticated else "system",
        action=action,
        object_type=object_type or "",
        object_id=object_id or "",
        object_repr=object_repr or "",
        tenant_id=tenant_id,
        changes=scrub(changes or {}),
    )


def record(actor, action, obj=None, **kwargs):
    """Append one audit row. `obj` may be a model instance; its tenant is used when it has one."""
    row = entry(actor, action, obj, **kwargs)
    row.save()
    return row


def _plain(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return str(value)


def field_values(obj):
    """The object's stored fields as JSON values, by field name (a foreign key as its target's text)."""
    values = {}
    for f in obj._meta.concrete_fields:
        if f.primary_key or getattr(f, "auto_now", False) or getattr(f, "auto_now_add", False):
            continue
        if f.is_relation:
            target = getattr(obj, f.name, None) if getattr(obj, f.attname) is not None else None
            values[f.name] = None if target is None else str(target)
        else:
            values[f.name] = _plain(getattr(obj, f.attname))
    return values


def model_diff(before, after):
    """The fields whose values differ between two dicts of field values."""
    keys = sorted(set(before) | set(after))
    return {k: [before.get(k), after.get(k)] for k in keys if before.get(k) != after.get(k)}


@contextlib.contextmanager
def recorded_by_service(*kinds):
    """Within the block, the generic signal rows of these kinds ("permission") are not
    written: the calling service records the change itself, once."""
    token = _recorded_by_service.set(_recorded_by_service.get() | frozenset(kinds))
    try:
        yield
    finally:
        _recorded_by_service.reset(token)


def is_recorded_by_service(kind):
    return kind in _recorded_by_service.get()
