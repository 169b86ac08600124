"""Display names shared by the tables and the figures. Imports nothing else of the package."""

from __future__ import annotations

from collections.abc import Iterable

# The reference tasks in the order the papers list them; any other task follows alphabetically.
TASK_ORDER: tuple[str, ...] = ("sst2", "sst5", "mr", "subj", "agnews", "cb")
TASK_LABELS = {"sst2": "SST2", "sst5": "SST5", "mr": "MR", "subj": "Subj", "agnews": "AGNews", "cb": "CB"}
METHOD_LABELS = {"gd": "GD", "lcgd": "LCGD"}


def task_label(task: str) -> str:
    """Display name of a task ("sst2" -> "SST2"); user tasks are shown as named."""
    return TASK_LABELS.get(task, task)


def method_label(method: str) -> str:
    """Display name of a training method ("lcgd" -> "LCGD")."""
    return METHOD_LABELS.get(method, method.upper())


def order_tasks(tasks: Iterable[str]) -> list[str]:
    """Unique tasks, the reference six first in paper order, then the others alphabetically."""
    tasks = set(tasks)
    return [t for t in TASK_ORDER if t in tasks] + sorted(tasks - set(TASK_ORDER))
