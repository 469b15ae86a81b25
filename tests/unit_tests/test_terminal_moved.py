"""The terminal integration's module paths of the previous version keep working: each
old path is its new module, with a `DeprecationWarning` naming the new path."""

from __future__ import annotations

import json
import subprocess
import sys

from turnbon_terminal._moved import MOVED

CHECK = """
import importlib, json, warnings
from turnbon_terminal._moved import MOVED
found = {}
for old, (new,) in MOVED.items():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(old)
    said = [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]
    found[old] = [module is importlib.import_module(new), said]
print(json.dumps(found))
"""


def test_every_old_terminal_path_is_its_new_module_with_a_warning() -> None:
    # a fresh interpreter: an import warns once per process
    out = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, check=True)
    found = json.loads(out.stdout)
    assert set(found) == set(MOVED)
    for old, (same, said) in found.items():
        (new,) = MOVED[old]
        assert same, old
        assert len(said) == 1 and f"{old} has moved to {new}" in said[0], (old, said)


def test_the_old_container_module_names_are_in_the_container_package() -> None:
    # `turnbon_terminal.container` is a package now; the old module's names are in it
    from turnbon_terminal.container import DEFAULT_IMAGE, Container
    from turnbon_terminal.container.instance import DEFAULT_IMAGE as image
    from turnbon_terminal.container.instance import Container as container

    assert (DEFAULT_IMAGE, Container) == (image, container)


def test_the_table_names_every_room() -> None:
    rooms = {new.split(".")[1] for (new,) in MOVED.values()}
    assert rooms == {"task", "host", "container", "verdict"}
