"""Bounds on what one job may ask for, so that no job can exhaust what every job shares.

- tasks: at most `PAI_JOB_MAX_TASKS` per job (10,000 by default: the largest framework
  FrameworkController supports), whether or not the job is a gang;
- host ports: at most `PAI_JOB_MAX_PORTS_PER_TASK` per task (OpenPAI's default labels
  `ssh` and `http` included), and per job no more than one host's port range holds —
  the local backend puts every task on one address.
"""

from django.conf import settings

from scheduler.podenv import PortAllocator, requested_ports

from .errors import ProtocolError, at

_HOST_PORTS = PortAllocator()


def check_limits(document):
    errors = []
    roles = document["taskRoles"]
    tasks = sum(spec.get("instances", 1) for spec in roles.values())
    if tasks > settings.PAI_JOB_MAX_TASKS:
        errors.append(at(["taskRoles"], f"the job has {tasks} tasks (instances of all task roles); at most "
                                        f"{settings.PAI_JOB_MAX_TASKS} are allowed per job"))
    per_task_limit = settings.PAI_JOB_MAX_PORTS_PER_TASK
    job_ports = 0
    for role, spec in roles.items():
        per_task = sum(requested_ports(spec["resourcePerInstance"].get("ports")).values())
        if per_task > per_task_limit:
            errors.append(at(["taskRoles", role, "resourcePerInstance", "ports"],
                             f"each task would hold {per_task} host ports; at most {per_task_limit} are "
                             "allowed per task"))
        job_ports += per_task * spec.get("instances", 1)
    host_range = _HOST_PORTS.total
    # Implied by the bounds above when they are broken: said only when they hold.
    if job_ports > host_range and not errors:
        errors.append(at(["taskRoles"], f"the job's tasks would hold {job_ports} host ports in all; a host offers "
                                        f"{host_range} ({_HOST_PORTS.first}-{_HOST_PORTS.last})"))
    if errors:
        raise ProtocolError(errors)
