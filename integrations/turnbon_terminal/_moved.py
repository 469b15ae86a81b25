"""The module paths of earlier versions: each module that moved when the package took
rooms of its own (task, host, container, verdict), and where it is now. They keep
working, with a `DeprecationWarning`, for one minor version."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

MOVED: Mapping[str, Sequence[str]] = {
    "turnbon_terminal.tasks": ("turnbon_terminal.task.folders",),
    "turnbon_terminal.tb2": ("turnbon_terminal.task.tb2",),
    "turnbon_terminal.settings": ("turnbon_terminal.task.settings",),
    "turnbon_terminal.limits": ("turnbon_terminal.task.limits",),
    "turnbon_terminal.budget": ("turnbon_terminal.task.budget",),
    "turnbon_terminal.enforcement": ("turnbon_terminal.task.enforcement",),
    "turnbon_terminal.envvars": ("turnbon_terminal.task.envvars",),
    "turnbon_terminal.bwrap": ("turnbon_terminal.host.bwrap",),
    "turnbon_terminal.sandbox": ("turnbon_terminal.host.sandbox",),
    "turnbon_terminal.host_episode": ("turnbon_terminal.host.episode",),
    "turnbon_terminal.cgroups": ("turnbon_terminal.host.cgroups",),
    "turnbon_terminal.disk": ("turnbon_terminal.host.disk",),
    "turnbon_terminal.users": ("turnbon_terminal.host.users",),
    "turnbon_terminal.workroot": ("turnbon_terminal.host.workroot",),
    "turnbon_terminal.container_episode": ("turnbon_terminal.container.episode",),
    "turnbon_terminal.container_exec": ("turnbon_terminal.container.command",),
    "turnbon_terminal.container_fork": ("turnbon_terminal.container.fork",),
    "turnbon_terminal.engine": ("turnbon_terminal.container.engine",),
    "turnbon_terminal.images": ("turnbon_terminal.container.images",),
    "turnbon_terminal.volumes": ("turnbon_terminal.container.volumes",),
    "turnbon_terminal.owners": ("turnbon_terminal.container.owners",),
    "turnbon_terminal.verifier": ("turnbon_terminal.verdict.verifier",),
    "turnbon_terminal.verifier_watch": ("turnbon_terminal.verdict.watch",),
    "turnbon_terminal.tamper": ("turnbon_terminal.verdict.tamper",),
    "turnbon_terminal.bytecode": ("turnbon_terminal.verdict.bytecode",),
    "turnbon_terminal.pytest_site": ("turnbon_terminal.verdict.pytest_site",),
    "turnbon_terminal.junit": ("turnbon_terminal.verdict.junit",),
    "turnbon_terminal.reward": ("turnbon_terminal.verdict.reward",),
}
