import pytest


@pytest.fixture(autouse=True)
def _tasks_inline(tasks_inline):
    """The welcome e-mails go through django-q2's task queue: here its tasks run at once."""
