"""What a command line does, as facts in the order its parts run: each simple command,
prefixes such as `sudo` or `uv run` stripped, is looked up in the program tables or its
rule; `bash -c`, `bash <<EOF`, `find -exec`, `python -m` and substitutions are followed
recursively."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace

from turnbon_graph.analysis.behaviours.rules import (
    is_scratch,
    node_manager,
    positionals,
    program_name,
    python_code,
    rule_archive,
    rule_awk,
    rule_checksum,
    rule_dd,
    rule_formatter,
    rule_git,
    rule_interpreter,
    rule_patch,
    rule_sed,
    rule_sort,
    rule_sqlite,
    rule_tee,
    rule_tsc,
    strip_options,
    testy_path,
    write_fact,
)
from turnbon_graph.analysis.behaviours.scanner import (
    WRITE_REDIRECTS,
    Stdin,
    line_tokens,
    parse_line,
    stdin_of,
)
from turnbon_graph.analysis.behaviours.tables import (
    BARE_DONE,
    BUILD_TOOLS,
    COMPILERS,
    COMPLETION,
    DECLARE,
    FILE_OP,
    FILE_OPS,
    FLAG_TOOLS,
    FORMATTERS,
    NEGATION,
    NEUTRAL,
    NODE_MANAGERS,
    OTHER,
    PREFIXES,
    PYTHON,
    PYTHON_CHECK_MODULES,
    PYTHON_CLI_MODULES,
    PYTHON_VALUED,
    READ,
    READ_PROGRAMS,
    RUN,
    RUNNERS,
    SCRIPT_INTERPRETERS,
    SHELLS,
    SUB_PREFIXES,
    SUBCOMMANDS,
    SUBMIT_PROGRAMS,
    TEST,
    TEST_PROGRAMS,
    TESTY,
    VERSION_ARGS,
    Fact,
)

_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[[^]]*\])?\+?=")
_MAX_DEPTH = 8
"""How deep `bash -c "bash -c ..."` and substitutions are followed."""


def line_facts(text: str, depth: int = 0, in_tmp: bool = False) -> list[Fact]:
    """The facts of a command line, in the order its parts run. `in_tmp`: the working
    directory is under /tmp (after `cd /tmp/x`), so relative paths are scratch too."""
    if depth > _MAX_DEPTH:
        return [OTHER]
    facts: list[Fact] = []
    for simple in parse_line(line_tokens(text)):
        for sub in simple.subs:  # run first; what they print is captured, not declared
            facts += [
                replace(f, declares=False, says_done=False)
                for f in line_facts(sub, depth + 1, in_tmp)
            ]
        if simple.argv[:1] == ["cd"]:  # `cd build` keeps the state, `cd /app` resets it
            target = simple.argv[1] if len(simple.argv) > 1 else "~"
            in_tmp = is_scratch(target, False) if target.startswith(("/", "~", "$")) else in_tmp
        facts += _argv_facts(simple.argv, stdin_of(simple), in_tmp, depth)
        for op, target, _ in simple.redirects:
            if op in WRITE_REDIRECTS and not (op == ">&" and (target.isdigit() or target == "-")):
                facts.append(write_fact(target, in_tmp))
    return facts


def _argv_facts(argv: list[str], stdin: Stdin, in_tmp: bool, depth: int) -> list[Fact]:
    """The facts of one program invocation (after redirections were taken out)."""
    while argv and _ASSIGNMENT.match(argv[0]):  # VAR=1 cmd
        argv = argv[1:]
    if not argv:
        return []
    name, args = program_name(argv[0]), argv[1:]
    if name in PREFIXES and not (name == "command" and args[:1] == ["-v"]):
        rest = strip_options(args, PREFIXES[name])
        if name == "env":
            while rest and _ASSIGNMENT.match(rest[0]):
                rest = rest[1:]
        if name == "timeout":
            rest = rest[1:]  # the duration
        if not rest:  # `env`, `xargs` (echo), `time` alone
            return [READ]
        return _argv_facts(rest, stdin, in_tmp, depth)
    positional = positionals(args)
    sub = positional[0] if positional else ""
    if (name, sub) in SUB_PREFIXES:
        rest = strip_options(args[args.index(sub) + 1 :], SUB_PREFIXES[name, sub])
        return _argv_facts(rest, stdin, in_tmp, depth) if rest else [OTHER]
    if len(args) == 1 and args[0] in VERSION_ARGS and name not in TEST_PROGRAMS:
        return [READ]
    if name in ("echo", "printf"):
        return [_echo(args)]
    if name in SUBMIT_PROGRAMS:
        return [DECLARE]
    rule = _RULES.get(name)
    if rule is not None:
        return rule(name, args, stdin, in_tmp, depth)
    if name in NEUTRAL or name in READ_PROGRAMS or (name == "command" and "-v" in args):
        return [READ]
    if PYTHON.fullmatch(name):
        return _python(args, stdin, in_tmp, depth)
    if name in SUBCOMMANDS:
        if name == "uv" and sub == "pip":
            return _argv_facts(["pip", *args[args.index(sub) + 1 :]], stdin, in_tmp, depth)
        return [SUBCOMMANDS[name].get(sub, OTHER)]
    if name in FLAG_TOOLS:
        flags = FLAG_TOOLS[name]
        return [next((flags[a] for a in args if a in flags), OTHER)]
    if name in NODE_MANAGERS:
        return [node_manager(name, sub, positional)]
    if name in TEST_PROGRAMS:
        return [TEST]
    if name in FILE_OPS:
        return [FILE_OP]
    if name in COMPILERS:
        return [TEST if "-fsyntax-only" in args else RUN]
    if name in BUILD_TOOLS:
        targets = [a for a in positional if "=" not in a and not a.isdigit()]
        return [TEST if any(TESTY.search(t) for t in targets) else RUN]
    if name in RUNNERS:
        return [RUN]
    if "/" in argv[0]:  # ./run.sh, build/app, /app/solve.sh
        return [TEST if testy_path(argv[0]) else RUN]
    return [OTHER]


def _echo(args: list[str]) -> Fact:
    """`echo`/`printf` print to stdout; they declare completion when what they print says
    the task is complete (`echo "Task complete"`), or is a bare "done" (see `BARE_DONE`)."""
    words = args
    while words and re.fullmatch(r"-[neE]+", words[0]):
        words = words[1:]
    printed = " ".join(words).replace("\\n", " ")
    if COMPLETION.search(printed) and not NEGATION.search(printed):
        return DECLARE
    bare = printed.strip(" \t.!:✓✅*-=").lower()
    return Fact(read=True, says_done=True) if bare in BARE_DONE else READ


def _shell(name: str, args: list[str], stdin: Stdin, in_tmp: bool, depth: int) -> list[Fact]:
    """bash/sh: `-c CODE` and a heredoc on stdin are command lines; a script runs code."""
    for i, arg in enumerate(args):
        if arg.startswith("-") and not arg.startswith("--") and "c" in arg and i + 1 < len(args):
            return line_facts(args[i + 1], depth + 1, in_tmp)
    options = [a for a in args if a.startswith("-")]
    scripts = positionals(args)
    if scripts:
        if any(o.startswith("-") and "n" in o and not o.startswith("--") for o in options):
            return [TEST]  # bash -n: a syntax check
        return [TEST if testy_path(scripts[0]) else RUN]
    if stdin.code is not None:
        return line_facts(stdin.code, depth + 1, in_tmp)
    return [RUN] if stdin.fed else [OTHER]


def _python(args: list[str], stdin: Stdin, in_tmp: bool, depth: int) -> list[Fact]:
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "-":
        flag = args[i]
        if flag.startswith("-c") or flag.startswith("-m"):
            value = flag[2:] or (args[i + 1] if i + 1 < len(args) else "")
            rest = args[i + (1 if flag[2:] else 2) :]
            if flag.startswith("-c"):
                return python_code(value, in_tmp)
            if value in PYTHON_CLI_MODULES:
                return _argv_facts([value, *rest], stdin, in_tmp, depth)
            if value in PYTHON_CHECK_MODULES or any(TESTY.search(p) for p in value.split(".")):
                return [TEST]
            return [OTHER] if value == "venv" else [RUN]
        i += 2 if flag in PYTHON_VALUED else 1
    script = args[i] if i < len(args) else "-"
    if script != "-":
        if program_name(script) == "manage.py" and args[i + 1 : i + 2] == ["test"]:
            return [TEST]
        return [TEST if testy_path(script) else RUN]
    if stdin.code is not None:
        return python_code(stdin.code, in_tmp)
    return [RUN]


def _find(name: str, args: list[str], stdin: Stdin, in_tmp: bool, depth: int) -> list[Fact]:
    """find lists files; `-delete` is a file operation; `-exec CMD {} ;` runs CMD."""
    facts = [READ]
    i = 0
    while i < len(args):
        if args[i] == "-delete":
            facts.append(FILE_OP)
        elif args[i].startswith("-fprint") or args[i] == "-fls":
            facts.append(OTHER)
        elif args[i] in ("-exec", "-execdir", "-ok", "-okdir"):
            end = i + 1
            while end < len(args) and args[end] not in (";", "+"):
                end += 1
            facts += _argv_facts(args[i + 1 : end], Stdin(), in_tmp, depth + 1)
            i = end
        i += 1
    return facts


_Rule = Callable[[str, list[str], Stdin, bool, int], list[Fact]]
_RULES: dict[str, _Rule] = {
    **dict.fromkeys(SHELLS, _shell),
    **dict.fromkeys(SCRIPT_INTERPRETERS, rule_interpreter),
    **dict.fromkeys(("sha1sum", "sha256sum", "sha512sum", "md5sum"), rule_checksum),
    **dict.fromkeys(("awk", "gawk", "mawk", "nawk"), rule_awk),
    **dict.fromkeys(("ruff", *FORMATTERS), rule_formatter),
    **dict.fromkeys(("tar", "unzip"), rule_archive),
    "sed": rule_sed,
    "gsed": rule_sed,
    "tee": rule_tee,
    "find": _find,
    "sort": rule_sort,
    "dd": rule_dd,
    "patch": rule_patch,
    "sqlite3": rule_sqlite,
    "git": rule_git,
    "tsc": rule_tsc,
}
"""Programs whose behaviour depends on their arguments."""
