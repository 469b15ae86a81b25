"""The verifier's watch inside the test process: runs pytest and reports what the code
under test did to the verification (see docs/verifier.md, "Tamper evidence").

Never imported by the runner: the verifier copies this file into a folder of its own and
runs it as `python -I -B -X pycache_prefix=CACHE <this file> <pytest copy> <setup>
<pytest args>`. Before any code of the deliverable can run, it:

- sends `started` on the evidence pipe (a descriptor the runner passed; only the runner
  reads the other end, so what was sent cannot be taken back), and `returned` with
  pytest's exit code once `pytest.main` returns: a process that ends between the two
  ended early;
- refuses bytecode without its source in the work folder (no sourceless loader there;
  `__pycache__` is never read at all, the cache prefix being the verifier's);
- refuses to open a named pipe, socket or device in the work folder (it could block
  forever): the test that tried gets an OSError at once;
- records, through an audit hook, wrappers of `os._exit` and `atexit.register`, and a
  pytest plugin of its own that compares pytest's internals and some of the standard
  library with a snapshot, what the deliverable did to pytest's hooks, reports, plugins
  and modules, to the report folder, to the process's end and with bytecode.

Code under test runs in this same process, so it can find and undo all of this: the
evidence shows what a deliverable did that did not hide, never that one did nothing.
"""

from __future__ import annotations

import sys

if __name__ == "__main__":  # the pytest copy first, before anything imports pytest
    sys.path.insert(0, sys.argv.pop(1))

import atexit
import contextlib
import errno
import json
import os
import posix
import stat
import threading
import types
from collections.abc import Callable, Iterator
from importlib import machinery
from typing import Any, NoReturn

import pytest

SPECIAL = {
    stat.S_IFIFO: "named pipe",
    stat.S_IFSOCK: "socket",
    stat.S_IFCHR: "character device",
    stat.S_IFBLK: "block device",
}
PYTEST = ("pytest", "_pytest", "pluggy")
"""Top-level names of pytest's own modules (the verifier's copy holds them all)."""
STDLIB = ("builtins", "os", "posixpath", "io", "pathlib", "json", "subprocess", "shutil", "re")
"""Standard modules the tests' checks lean on: a function or class of theirs replaced by
the deliverable's code is recorded."""
WRITES = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
LIBRARY = tuple({os.path.dirname(p) + "/" for p in (os.__file__, os.path.realpath(os.__file__))})
"""The interpreter's own library (its site-packages aside), as code names it."""
HERE = os.path.realpath(__file__)
OURS = {__file__, HERE}
"""This file, as code names it."""


def inside(path: str, folder: str) -> bool:
    """Whether `path` is `folder` or below it (as strings, no file system access)."""
    return path == folder or path.startswith(folder.rstrip("/") + "/")


class Watch:
    """What the deliverable did, sent to the runner as it happens (each fact once)."""

    def __init__(self, setup: dict[str, Any]) -> None:
        self.fd: int = setup["fd"]
        os.set_blocking(self.fd, False)  # a full pipe drops a line, never blocks a test
        os.set_inheritable(self.fd, False)  # programs the tests start do not get it
        # Every line carries the runner's token, read from a pipe closed at once: a line
        # the deliverable writes without digging it out of this object is told apart.
        self.token = os.read(setup["token_fd"], 64).decode()
        os.close(setup["token_fd"])
        self.pid = os.getpid()
        self.workdir = os.path.realpath(setup["workdir"])
        self.native_extensions = bool(setup.get("native_extensions"))
        self.reports = os.path.realpath(setup["reports"])
        self.site = os.path.realpath(setup["site"])
        # sys.path now holds only what -I allows (the interpreter's library and
        # site-packages, and pytest's copy), none of it the deliverable's.
        ours = [os.path.realpath(p) for p in (*sys.path, setup["tests"], HERE) if p]
        self.trusted = tuple(p for p in ours if not inside(self.workdir, p))
        self.sent: set[str] = set()
        self.busy = False
        self.verdicts: dict[str, bool] = {}
        self.snapshot: dict[tuple[str, str], tuple[Any, Any]] = {}
        self.keys: dict[str, tuple[Any, frozenset[str]]] = {}
        self.manager: Any = None

    def send(self, kind: str, text: str = "", **extra: Any) -> None:
        line = json.dumps({"kind": kind, "text": text[:400], **extra, "t": self.token})
        if line in self.sent:
            return
        self.sent.add(line)
        with contextlib.suppress(OSError):  # full or closed: the runner has what arrived
            os.write(self.fd, line.encode() + b"\n")

    def tamper(self, text: str) -> None:
        self.send("tamper", text)

    # -------------------------------------------------------------- attribution

    def untrusted(self, filename: str) -> bool:
        """Whether code of `filename` is the deliverable's (or made at run time, such
        as exec'd text): neither the interpreter's, nor pytest's, nor the tests'."""
        known = self.verdicts.get(filename)
        if known is None:
            if filename.startswith("<frozen "):
                known = False
            else:
                path = os.path.realpath(filename) if filename.startswith("/") else filename
                known = inside(path, self.workdir) or not any(
                    inside(path, folder) for folder in self.trusted
                )
            self.verdicts[filename] = known
        return known

    def shown(self, filename: str) -> str:
        path = os.path.realpath(filename) if filename.startswith("/") else filename
        return os.path.relpath(path, self.workdir) if inside(path, self.workdir) else filename

    def culprit(self, frame: types.FrameType | None) -> str | None:
        """The deliverable's frame nearest to the event, past the standard library
        (pathlib calling open) and this file: `file:line`, or None when the nearest
        other frame is pytest's, the tests' or a library's."""
        while frame is not None:
            name = frame.f_code.co_filename
            if not (name.startswith("<frozen ") or name in OURS or _library(name)):
                return f"{self.shown(name)}:{frame.f_lineno}" if self.untrusted(name) else None
            frame = frame.f_back
        return None

    def origin(self, value: Any) -> str | None:
        """The file of the deliverable's code `value` comes from, if it does."""
        for code in _codes(value):
            if self.untrusted(code.co_filename):
                return self.shown(code.co_filename)
        return None

    # ------------------------------------------------------------ the audit hook

    def audit(self, event: str, args: tuple[Any, ...]) -> None:
        handler = EVENTS.get(event)
        if handler is None or self.busy:
            return
        self.busy = True
        try:
            handler(self, args)
        finally:
            self.busy = False

    def on_open(self, args: tuple[Any, ...]) -> None:
        path, mode, flags = args
        if not isinstance(path, str | bytes | os.PathLike):
            return
        name = os.path.abspath(os.fsdecode(path))
        writes = any(c in mode for c in "wax+") if mode else bool(flags & WRITES)
        if inside(name, self.workdir):
            self.refuse_special(name)
        self.on_paths((name,), "written" if writes else "read", writes)

    def refuse_special(self, name: str) -> None:
        try:
            kind = SPECIAL.get(stat.S_IFMT(os.stat(name).st_mode))
        except OSError:
            return
        if kind is not None:
            self.send("refused", f"{os.path.relpath(name, self.workdir)} (a {kind})")
            raise OSError(
                errno.EPERM,
                f"the verifier opens no {kind} in the work folder (it could block forever)",
                name,
            )

    def on_paths(self, paths: tuple[str, ...], what: str, writes: bool) -> None:
        who = self.culprit(sys._getframe())
        for name in paths:
            if who is not None and inside(os.path.realpath(name), self.reports):
                self.tamper(f"the report folder was {what} by {who} ({os.path.basename(name)})")
            if writes and name.endswith(".pyc"):
                self.tamper(f"bytecode was written by {who or 'the tests'}: {self.shown(name)}")

    def on_move(self, args: tuple[Any, ...]) -> None:
        paths = [p for p in args[:2] if isinstance(p, str | bytes | os.PathLike)]
        self.on_paths(tuple(os.path.abspath(os.fsdecode(p)) for p in paths), "changed", True)

    def on_marshal(self, args: tuple[Any, ...]) -> None:
        frame: types.FrameType | None = sys._getframe()
        while frame is not None and frame.f_code.co_filename in OURS:
            frame = frame.f_back
        if frame is not None and self.untrusted(frame.f_code.co_filename):
            where = f"{self.shown(frame.f_code.co_filename)}:{frame.f_lineno}"
            self.tamper(f"bytecode was loaded with marshal by {where}")

    def on_hook(self, args: tuple[Any, ...]) -> None:
        who = self.culprit(sys._getframe())
        self.tamper(f"another audit hook was added by {who or 'the tests'}")

    # ------------------------------------------------------- pytest's internals

    def take_snapshot(self) -> None:
        """Remembers the functions and classes of pytest's modules (and of `STDLIB`)
        not yet remembered, and which attributes pytest's classes have."""
        for name, module in list(sys.modules.items()):
            ours = name.partition(".")[0] in PYTEST or name in STDLIB
            if not ours or not isinstance(module, types.ModuleType):
                continue
            for owner, namespace in _namespaces(name, module):
                if owner in self.keys:
                    continue
                self.keys[owner] = (namespace, frozenset(namespace))
                for attr, value in list(namespace.items()):
                    if _watched(value):
                        self.snapshot[(owner, attr)] = (namespace, value)

    def check(self) -> None:
        """Compares pytest's internals and `STDLIB` with the snapshot, and pytest's
        hooks and modules with pytest's and the tests' own; records what the
        deliverable changed."""
        if self.busy:
            return
        self.busy = True
        try:
            self.compare()
            self.hooks()
            self.modules()
            self.tracing()
        except Exception as exc:  # the deliverable broke what is read here: evidence too
            self.tamper(f"the verifier's checks failed: {type(exc).__name__}: {exc}")
        finally:
            self.busy = False

    def compare(self) -> None:
        """pytest changes some of its own classes at run time (deprecated aliases, flags),
        so a change counts when the new value is the deliverable's code, or a plain value
        where code was (`TestReport.failed = False`)."""
        for (owner, attr), (namespace, value) in self.snapshot.items():
            now = namespace.get(attr)
            if now is not value:
                self.changed(owner, attr, now, "replaced")
        for owner, (namespace, keys) in self.keys.items():
            if owner.partition(".")[0] in PYTEST and isinstance(namespace, types.MappingProxyType):
                for attr in sorted(set(namespace) - keys):
                    if not attr.startswith("_") or _watched(namespace.get(attr)):
                        self.changed(owner, attr, namespace.get(attr), "added")

    def changed(self, owner: str, attr: str, now: Any, how: str) -> None:
        where = self.origin(now)
        if owner.partition(".")[0] not in PYTEST:
            if where is not None:
                self.tamper(f"{owner}.{attr} was {how} by code of {where}")
            elif not any(_codes(now)):  # no code to trace (a partial of a builtin): still
                self.tamper(f"{owner}.{attr} was {how} by {now!r:.60}")
        elif where is not None:
            self.tamper(
                f"pytest's internals were changed: {owner}.{attr} was {how} by code of {where}"
            )
        elif not _watched(now):
            self.tamper(f"pytest's internals were changed: {owner}.{attr} was {how} by {now!r:.40}")

    def hooks(self) -> None:
        if self.manager is None:
            return
        for caller in list(vars(self.manager.hook).values()):
            for impl in caller.get_hookimpls() if hasattr(caller, "get_hookimpls") else ():
                where = self.origin(impl.function)
                if where is not None:
                    self.tamper(f"a pytest hook of {where} ({impl.plugin_name}): {caller.name}")

    def tracing(self) -> None:
        """A profile or trace hook set by the deliverable (`sys.setprofile`, `settrace`,
        `threading.setprofile`, `settrace`) sees every call pytest makes, and can change
        what it returns: evidence, whatever code it is."""
        hooks = {
            "sys.setprofile": sys.getprofile(),
            "sys.settrace": sys.gettrace(),
            "threading.setprofile": getattr(threading, "_profile_hook", None),
            "threading.settrace": getattr(threading, "_trace_hook", None),
        }
        for how, hook in hooks.items():
            if hook is not None:
                where = self.origin(hook)
                by = f"code of {where}" if where else f"{hook!r:.60}"
                self.tamper(f"a hook on every call was set with {how}: {by}")

    def modules(self) -> None:
        for name, module in list(sys.modules.items()):
            if name.partition(".")[0] not in PYTEST:
                continue
            file = getattr(module, "__file__", None)
            if not isinstance(file, str) or not inside(os.path.realpath(file), self.site):
                self.tamper(f"sys.modules[{name!r}] is not pytest's own module")


def _library(filename: str) -> bool:
    return filename.startswith(LIBRARY) and "-packages/" not in filename


def _namespaces(name: str, module: types.ModuleType) -> Iterator[tuple[str, Any]]:
    """The module's namespace, then those of the classes it defines."""
    yield name, vars(module)
    for attr, value in list(vars(module).items()):
        if isinstance(value, type) and value.__module__ == name:
            yield f"{name}.{attr}", value.__dict__


def _watched(value: Any) -> bool:
    kinds = (types.FunctionType, types.BuiltinFunctionType, type, classmethod, staticmethod)
    return isinstance(value, (*kinds, property))


def _codes(value: Any) -> Iterator[types.CodeType]:
    """The code objects behind a function, method, property, partial or class."""
    todo = [value]
    for _ in range(32):
        if not todo:
            return
        item = todo.pop()
        if isinstance(item, types.FunctionType):
            yield item.__code__
        elif isinstance(item, types.MethodType | classmethod | staticmethod):
            todo.append(item.__func__)
        elif isinstance(item, property):
            todo += [f for f in (item.fget, item.fset) if f is not None]
        elif isinstance(item, type):
            todo += [v for v in vars(item).values() if isinstance(v, types.FunctionType)][:8]
        elif callable(getattr(item, "func", None)):  # functools.partial
            todo.append(item.func)
        elif item is not None:
            todo.append(type(item))


EVENTS: dict[str, Callable[[Watch, tuple[Any, ...]], None]] = {
    "open": Watch.on_open,
    "os.rename": Watch.on_move,
    "os.link": Watch.on_move,
    "os.symlink": Watch.on_move,
    "shutil.copyfile": Watch.on_move,
    "shutil.move": Watch.on_move,
    "marshal.loads": Watch.on_marshal,
    "marshal.load": Watch.on_marshal,
    "sys.addaudithook": Watch.on_hook,
}


class Observer:
    """The watch's pytest plugin: completes the snapshot once pytest is configured (its
    plugins imported), checks after every report and at the end of the session."""

    def __init__(self, watch: Watch) -> None:
        self.watch = watch

    @pytest.hookimpl(trylast=True)
    def pytest_configure(self, config: pytest.Config) -> None:
        self.watch.manager = config.pluginmanager
        self.watch.take_snapshot()

    def pytest_runtest_logreport(self) -> None:
        self.watch.check()

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self) -> None:
        self.watch.check()


def refusing_bytecode(
    workdir: str, native_extensions: bool = False
) -> Callable[[str], machinery.FileFinder]:
    """A path hook for the work folder's folders: source modules only, so a
    `helper.pyc` alone is no module, and a native extension beside an honest
    `helper.py` is not the module found first (elsewhere the usual hook answers). A
    task that declares `native_extensions` has them found, before source, as usual."""
    loaders: list[tuple[type[Any], list[str]]] = [
        (machinery.SourceFileLoader, machinery.SOURCE_SUFFIXES)
    ]
    if native_extensions:
        loaders.insert(0, (machinery.ExtensionFileLoader, machinery.EXTENSION_SUFFIXES))

    def hook(path: str) -> machinery.FileFinder:
        if not inside(os.path.realpath(path or "."), workdir):
            raise ImportError("not the work folder")
        return machinery.FileFinder(path, *loaders)

    return hook


def main() -> int:
    """Runs pytest on `sys.argv[2:]` under the watch; `sys.argv[1]` is the setup."""
    watch = Watch(json.loads(sys.argv[1]))
    watch.send("started", pid=watch.pid)
    sys.path_hooks.insert(0, refusing_bytecode(watch.workdir, watch.native_extensions))
    sys.path_importer_cache.clear()
    real_exit, real_register = os._exit, atexit.register

    def _exit(status: int) -> NoReturn:
        if os.getpid() == watch.pid:
            who = watch.culprit(sys._getframe().f_back)
            watch.tamper(f"os._exit({status!r}) was called by {who or 'the tests, or at exit'}")
            watch.check()
        real_exit(status)

    def register(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        who = watch.culprit(sys._getframe().f_back)
        if who is not None:
            name = getattr(function, "__qualname__", type(function).__name__)
            watch.tamper(f"atexit.register({name}) was called by {who}")
        return real_register(function, *args, **kwargs)

    os._exit = posix._exit = _exit
    atexit.register = register  # type: ignore[assignment]
    real_register(watch.check)  # registered first, so it runs last
    watch.take_snapshot()
    sys.addaudithook(watch.audit)
    code = int(pytest.main(sys.argv[2:], plugins=[Observer(watch)]))
    watch.check()
    watch.send("returned", pid=watch.pid, code=code)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
