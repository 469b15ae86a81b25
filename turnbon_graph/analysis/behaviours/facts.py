"""What a command line does, as facts in the order its parts run: each simple command,
prefixes such as `sudo` or `uv run` stripped, is looked up in the program tables or its
rule; `bash -c`, `bash <<EOF`, `find -exec`, `python -m` and substitutions are followed
recursively."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace

from turnbon_graph.analysis.behaviours.rules import (
    _archive,
    _awk,
    _checksum,
    _dd,
    _formatter,
    _git,
    _interpreter,
    _is_scratch,
    _name,
    _node_manager,
    _patch,
    _positionals,
    _python_code,
    _sed,
    _sort,
    _sqlite,
    _strip_options,
    _tee,
    _testy_path,
    _tsc,
    _write,
)
from turnbon_graph.analysis.behaviours.scanner import (
    _WRITE_REDIRECTS,
    _parse,
    _Stdin,
    _stdin_of,
    _tokens,
)
from turnbon_graph.analysis.behaviours.tables import (
    _BARE_DONE,
    _BUILD_TOOLS,
    _COMPILERS,
    _COMPLETION,
    _DECLARE,
    _FILE_OP,
    _FILE_OPS,
    _FLAG_TOOLS,
    _FORMATTERS,
    _NEGATION,
    _NEUTRAL,
    _NODE_MANAGERS,
    _OTHER,
    _PREFIXES,
    _PYTHON,
    _PYTHON_CHECK_MODULES,
    _PYTHON_CLI_MODULES,
    _PYTHON_VALUED,
    _READ,
    _READ_PROGRAMS,
    _RUN,
    _RUNNERS,
    _SCRIPT_INTERPRETERS,
    _SHELLS,
    _SUB_PREFIXES,
    _SUBCOMMANDS,
    _SUBMIT_PROGRAMS,
    _TEST,
    _TEST_PROGRAMS,
    _TESTY,
    _VERSION_ARGS,
    _Fact,
)

_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[[^]]*\])?\+?=")
_MAX_DEPTH = 8
"""How deep `bash -c "bash -c ..."` and substitutions are followed."""


def _line_facts(text: str, depth: int = 0, in_tmp: bool = False) -> list[_Fact]:
    """The facts of a command line, in the order its parts run. `in_tmp`: the working
    directory is under /tmp (after `cd /tmp/x`), so relative paths are scratch too."""
    if depth > _MAX_DEPTH:
        return [_OTHER]
    facts: list[_Fact] = []
    for simple in _parse(_tokens(text)):
        for sub in simple.subs:  # run first; what they print is captured, not declared
            facts += [
                replace(f, declares=False, says_done=False)
                for f in _line_facts(sub, depth + 1, in_tmp)
            ]
        if simple.argv[:1] == ["cd"]:  # `cd build` keeps the state, `cd /app` resets it
            target = simple.argv[1] if len(simple.argv) > 1 else "~"
            in_tmp = _is_scratch(target, False) if target.startswith(("/", "~", "$")) else in_tmp
        facts += _argv_facts(simple.argv, _stdin_of(simple), in_tmp, depth)
        for op, target, _ in simple.redirects:
            if op in _WRITE_REDIRECTS and not (op == ">&" and (target.isdigit() or target == "-")):
                facts.append(_write(target, in_tmp))
    return facts


def _argv_facts(argv: list[str], stdin: _Stdin, in_tmp: bool, depth: int) -> list[_Fact]:
    """The facts of one program invocation (after redirections were taken out)."""
    while argv and _ASSIGNMENT.match(argv[0]):  # VAR=1 cmd
        argv = argv[1:]
    if not argv:
        return []
    name, args = _name(argv[0]), argv[1:]
    if name in _PREFIXES and not (name == "command" and args[:1] == ["-v"]):
        rest = _strip_options(args, _PREFIXES[name])
        if name == "env":
            while rest and _ASSIGNMENT.match(rest[0]):
                rest = rest[1:]
        if name == "timeout":
            rest = rest[1:]  # the duration
        if not rest:  # `env`, `xargs` (echo), `time` alone
            return [_READ]
        return _argv_facts(rest, stdin, in_tmp, depth)
    positional = _positionals(args)
    sub = positional[0] if positional else ""
    if (name, sub) in _SUB_PREFIXES:
        rest = _strip_options(args[args.index(sub) + 1 :], _SUB_PREFIXES[name, sub])
        return _argv_facts(rest, stdin, in_tmp, depth) if rest else [_OTHER]
    if len(args) == 1 and args[0] in _VERSION_ARGS and name not in _TEST_PROGRAMS:
        return [_READ]
    if name in ("echo", "printf"):
        return [_echo(args)]
    if name in _SUBMIT_PROGRAMS:
        return [_DECLARE]
    rule = _RULES.get(name)
    if rule is not None:
        return rule(name, args, stdin, in_tmp, depth)
    if name in _NEUTRAL or name in _READ_PROGRAMS or (name == "command" and "-v" in args):
        return [_READ]
    if _PYTHON.fullmatch(name):
        return _python(args, stdin, in_tmp, depth)
    if name in _SUBCOMMANDS:
        if name == "uv" and sub == "pip":
            return _argv_facts(["pip", *args[args.index(sub) + 1 :]], stdin, in_tmp, depth)
        return [_SUBCOMMANDS[name].get(sub, _OTHER)]
    if name in _FLAG_TOOLS:
        flags = _FLAG_TOOLS[name]
        return [next((flags[a] for a in args if a in flags), _OTHER)]
    if name in _NODE_MANAGERS:
        return [_node_manager(name, sub, positional)]
    if name in _TEST_PROGRAMS:
        return [_TEST]
    if name in _FILE_OPS:
        return [_FILE_OP]
    if name in _COMPILERS:
        return [_TEST if "-fsyntax-only" in args else _RUN]
    if name in _BUILD_TOOLS:
        targets = [a for a in positional if "=" not in a and not a.isdigit()]
        return [_TEST if any(_TESTY.search(t) for t in targets) else _RUN]
    if name in _RUNNERS:
        return [_RUN]
    if "/" in argv[0]:  # ./run.sh, build/app, /app/solve.sh
        return [_TEST if _testy_path(argv[0]) else _RUN]
    return [_OTHER]


def _echo(args: list[str]) -> _Fact:
    """`echo`/`printf` print to stdout; they declare completion when what they print says
    the task is complete (`echo "Task complete"`), or is a bare "done" (see `_BARE_DONE`)."""
    words = args
    while words and re.fullmatch(r"-[neE]+", words[0]):
        words = words[1:]
    printed = " ".join(words).replace("\\n", " ")
    if _COMPLETION.search(printed) and not _NEGATION.search(printed):
        return _DECLARE
    bare = printed.strip(" \t.!:✓✅*-=").lower()
    return _Fact(read=True, says_done=True) if bare in _BARE_DONE else _READ


def _shell(name: str, args: list[str], stdin: _Stdin, in_tmp: bool, depth: int) -> list[_Fact]:
    """bash/sh: `-c CODE` and a heredoc on stdin are command lines; a script runs code."""
    for i, arg in enumerate(args):
        if arg.startswith("-") and not arg.startswith("--") and "c" in arg and i + 1 < len(args):
            return _line_facts(args[i + 1], depth + 1, in_tmp)
    options = [a for a in args if a.startswith("-")]
    scripts = _positionals(args)
    if scripts:
        if any(o.startswith("-") and "n" in o and not o.startswith("--") for o in options):
            return [_TEST]  # bash -n: a syntax check
        return [_TEST if _testy_path(scripts[0]) else _RUN]
    if stdin.code is not None:
        return _line_facts(stdin.code, depth + 1, in_tmp)
    return [_RUN] if stdin.fed else [_OTHER]


def _python(args: list[str], stdin: _Stdin, in_tmp: bool, depth: int) -> list[_Fact]:
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "-":
        flag = args[i]
        if flag.startswith("-c") or flag.startswith("-m"):
            value = flag[2:] or (args[i + 1] if i + 1 < len(args) else "")
            rest = args[i + (1 if flag[2:] else 2) :]
            if flag.startswith("-c"):
                return _python_code(value, in_tmp)
            if value in _PYTHON_CLI_MODULES:
                return _argv_facts([value, *rest], stdin, in_tmp, depth)
            if value in _PYTHON_CHECK_MODULES or any(_TESTY.search(p) for p in value.split(".")):
                return [_TEST]
            return [_OTHER] if value == "venv" else [_RUN]
        i += 2 if flag in _PYTHON_VALUED else 1
    script = args[i] if i < len(args) else "-"
    if script != "-":
        if _name(script) == "manage.py" and args[i + 1 : i + 2] == ["test"]:
            return [_TEST]
        return [_TEST if _testy_path(script) else _RUN]
    if stdin.code is not None:
        return _python_code(stdin.code, in_tmp)
    return [_RUN]


def _find(name: str, args: list[str], stdin: _Stdin, in_tmp: bool, depth: int) -> list[_Fact]:
    """find lists files; `-delete` is a file operation; `-exec CMD {} ;` runs CMD."""
    facts = [_READ]
    i = 0
    while i < len(args):
        if args[i] == "-delete":
            facts.append(_FILE_OP)
        elif args[i].startswith("-fprint") or args[i] == "-fls":
            facts.append(_OTHER)
        elif args[i] in ("-exec", "-execdir", "-ok", "-okdir"):
            end = i + 1
            while end < len(args) and args[end] not in (";", "+"):
                end += 1
            facts += _argv_facts(args[i + 1 : end], _Stdin(), in_tmp, depth + 1)
            i = end
        i += 1
    return facts


_Rule = Callable[[str, list[str], _Stdin, bool, int], list[_Fact]]
_RULES: dict[str, _Rule] = {
    **dict.fromkeys(_SHELLS, _shell),
    **dict.fromkeys(_SCRIPT_INTERPRETERS, _interpreter),
    **dict.fromkeys(("sha1sum", "sha256sum", "sha512sum", "md5sum"), _checksum),
    **dict.fromkeys(("awk", "gawk", "mawk", "nawk"), _awk),
    **dict.fromkeys(("ruff", *_FORMATTERS), _formatter),
    **dict.fromkeys(("tar", "unzip"), _archive),
    "sed": _sed,
    "gsed": _sed,
    "tee": _tee,
    "find": _find,
    "sort": _sort,
    "dd": _dd,
    "patch": _patch,
    "sqlite3": _sqlite,
    "git": _git,
    "tsc": _tsc,
}
"""Programs whose behaviour depends on their arguments."""
