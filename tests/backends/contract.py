"""The backend contract (scheduler/backends/base.py) as tests any backend must pass.

Subclass :class:`BackendContract` in a ``test_*.py`` module and provide a
``contract_backend`` fixture returning a fresh backend with a node named by
``contract_node`` (a fixture too, with the node's name). The tests only use the
interface and never depend on a pod's task actually running, so a backend over a
simulated cluster passes them as well as one that runs processes.
"""

import pytest

from scheduler.backends import (
    CursorExpiredError,
    PermanentCreationError,
    PodConflictError,
    PodSpec,
    pod_labels,
    pod_name,
)


class BackendContract:
    @pytest.fixture
    def make_spec(self, contract_node):
        def make(index, **kwargs):
            labels = pod_labels("contract", "worker", index, 0, 0)
            return PodSpec(
                name=pod_name("contract", "worker", index, 0, 0),
                node=contract_node,
                commands="sleep 30",
                labels=labels,
                grace_seconds=0,
                **kwargs,
            )

        return make

    def test_nodes_are_listed_sorted_with_the_contract_node(self, contract_backend, contract_node):
        names = [n.name for n in contract_backend.list_nodes()]
        assert contract_node in names
        assert names == sorted(names)

    def test_create_is_idempotent(self, contract_backend, make_spec):
        first = contract_backend.create_pod(make_spec(0))
        second = contract_backend.create_pod(make_spec(0))
        assert first.uid == second.uid
        assert [p.uid for p in contract_backend.list_pods({"pai.job": "contract"})] == [first.uid]

    def test_create_on_an_unknown_node_is_permanent(self, contract_backend):
        with pytest.raises(PermanentCreationError):
            contract_backend.create_pod(PodSpec(name="contract-nowhere", node="no-such-node-anywhere", commands="true"))

    def test_observations_carry_identity_and_labels(self, contract_backend, make_spec, contract_node):
        created = contract_backend.create_pod(make_spec(1))
        assert created.name == make_spec(1).name
        assert created.uid and created.resource_version
        assert created.labels["pai.task-index"] == "1"
        [listed] = contract_backend.list_pods({"pai.job": "contract", "pai.task-index": "1"})
        assert (listed.uid, listed.node) == (created.uid, contract_node)
        assert not listed.deleted

    def test_delete_has_a_uid_precondition_and_ignores_unknown_pods(self, contract_backend, make_spec):
        created = contract_backend.create_pod(make_spec(2))
        with pytest.raises(PodConflictError):
            contract_backend.delete_pod(created.name, uid="not-" + created.uid)
        assert contract_backend.delete_pod("contract-never-created") is False
        assert contract_backend.delete_pod(created.name, uid=created.uid, grace_seconds=0) is True

    def test_the_change_feed_resumes_from_a_cursor(self, contract_backend, make_spec):
        cursor = contract_backend.cursor()
        created = contract_backend.create_pod(make_spec(3))
        changes = contract_backend.poll(cursor)
        assert created.uid in [o.uid for o in changes]
        versions = [o.resource_version for o in changes]
        assert len(set(versions)) == len(versions)
        assert created.uid in [o.uid for o in contract_backend.poll(None)]

    def test_a_foreign_cursor_asks_for_a_relist(self, contract_backend):
        with pytest.raises(CursorExpiredError):
            contract_backend.poll("not-a-cursor-of-this-backend")
