"""The rules for programs whose behaviour depends on their arguments (`sed -i`,
`git diff --no-index`, `black --check`, `sqlite3` with a query, ...), and the path and
argument helpers they share with `turnbon_graph.analysis.behaviours.facts`."""

from __future__ import annotations

import re

from turnbon_graph.analysis.behaviours.scanner import _Stdin
from turnbon_graph.analysis.behaviours.tables import (
    _EDIT,
    _FILE_OP,
    _FORMATTERS,
    _INSTALL,
    _NODE_INSTALL,
    _NODE_READ,
    _OTHER,
    _READ,
    _RUN,
    _SUBCOMMANDS,
    _TEST,
    _TESTY,
    _Fact,
)


def _is_scratch(path: str, in_tmp: bool) -> bool:
    """Under /tmp (written there, or relative after `cd /tmp`): writes do not count."""
    if path.startswith(("$TMPDIR", "${TMPDIR")):
        return True
    if not path.startswith(("/", "~", "$")):
        return in_tmp
    return path in ("/tmp", "/var/tmp") or path.startswith(("/tmp/", "/var/tmp/"))


def _write(path: str, in_tmp: bool) -> _Fact:
    """Writing to `path`: an edit, unless it is a device (/dev/null) or scratch (/tmp)."""
    if path.startswith("/dev/"):
        return _READ
    return _OTHER if _is_scratch(path, in_tmp) else _EDIT


def _writes(paths: list[str], in_tmp: bool) -> _Fact:
    """Writing several files (`tee a b`, `sed -i ... a b`)."""
    kinds = [_write(p, in_tmp) for p in paths] or [_EDIT]
    return _EDIT if _EDIT in kinds else _OTHER if _OTHER in kinds else _READ


def _strip_options(args: list[str], valued: frozenset[str]) -> list[str]:
    """`args` after the leading options (and the values of those in `valued`)."""
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "-":
        if args[i] == "--":
            return args[i + 1 :]
        i += 2 if args[i] in valued else 1
    return args[i:]


def _positionals(args: list[str]) -> list[str]:
    return [a for a in args if not a.startswith("-")]


def _name(word: str) -> str:
    """A program's name: its basename, with `pip3.11` as `pip`."""
    name = word.rsplit("/", 1)[-1]
    return "pip" if re.fullmatch(r"pip\d*(?:\.\d+)?", name) else name


def _testy_path(path: str) -> bool:
    parts = path.split("/")
    return bool(_TESTY.search(parts[-1])) or any(p in ("test", "tests") for p in parts[:-1])


# ---------------------------------------------------------------------------------------
# Python code


_PY_OPEN = re.compile(
    r"""\bopen\(\s*(?P<path>[^,()]+?)\s*,\s*(?:mode\s*=\s*)?[rRbBuU]?(['"])(?P<mode>[^'"]*)\2"""
)
_PY_WRITE_PATH = re.compile(r"""\.write_(?:text|bytes)\(""")
_PY_PATH_LITERAL = re.compile(r"""Path\(\s*(?P<path>[rRbBfF]*(['"])[^'"]*\2)\s*\)\s*$""")
_PY_STRING = re.compile(r"""[rRbBfF]*(['"])(?P<value>[^'"]*)\1""")
_PY_ASSERT = re.compile(r"(?m)(?:^|;)\s*assert\b")


def _python_code(code: str, in_tmp: bool) -> list[_Fact]:
    """Python source that runs: a test when it asserts; an edit for each file it opens for
    writing (`open(path, 'w'|'a'|'x'|'+')`, `Path(path).write_text(...)`). A literal path
    under /tmp does not count; a computed path counts unless the code names /tmp or
    tempfile anywhere (then it may well be scratch, and we do not guess)."""
    facts = [_TEST if _PY_ASSERT.search(code) else _RUN]
    scratchy = "/tmp" in code or "tempfile" in code
    paths: list[str | None] = [
        m["path"] for m in _PY_OPEN.finditer(code) if set(m["mode"]) & set("wax+")
    ]
    for m in _PY_WRITE_PATH.finditer(code):
        literal = _PY_PATH_LITERAL.search(code[: m.start()])
        paths.append(literal["path"] if literal else None)
    for path in paths:
        literal = _PY_STRING.fullmatch(path.strip()) if path is not None else None
        if literal is not None:
            facts.append(_write(literal["value"], in_tmp))
        elif not scratchy:
            facts.append(_EDIT)
    return facts


# ---------------------------------------------------------------------------------------
# Programs judged by their arguments


def _node_manager(name: str, sub: str, positional: list[str]) -> _Fact:
    """npm / yarn / pnpm / bun: install, test, run a script (a test when its name is)."""
    if sub in _NODE_INSTALL or (name == "yarn" and not sub):
        return _INSTALL
    if sub in ("test", "t"):
        return _TEST
    if sub in _NODE_READ:
        return _READ
    if sub == "run":
        script = positional[1] if len(positional) > 1 else ""
        return _TEST if _TESTY.search(script) else _RUN if script else _READ
    if sub in ("start", "build", "dev", "serve") or (sub and name in ("yarn", "pnpm", "bun")):
        return _TEST if _TESTY.search(sub) else _RUN  # `yarn lint`, `bun index.ts`
    return _OTHER


def _interpreter(
    name: str, args: list[str], stdin: _Stdin, in_tmp: bool, depth: int
) -> list[_Fact]:
    """node / deno / ruby / perl: `perl -pi -e` edits in place; `-c` / `--check` (syntax
    checks), `node --test`, `deno test` and test-named scripts are tests; else runs code."""
    if name == "perl" and any(re.fullmatch(r"-[plnaws0]*i\S*", a) for a in args):
        return [_writes(_sed_like_files(args, "e"), in_tmp)]
    if any(a in ("--test", "--check") or (a == "-c" and name != "deno") for a in args):
        return [_TEST]  # deno's -c is --config
    scripts = _positionals(args)
    if scripts and (scripts[0] == "test" or _testy_path(scripts[0])):
        return [_TEST]
    return [_RUN]


def _sed_like_files(args: list[str], script_flags: str) -> list[str]:
    """The file operands of `sed`/`perl`: the positionals, less the script when it was not
    given with a flag (-e / -f)."""
    files, scripted, skip = [], False, False
    for arg in args:
        if skip:
            skip = False
        elif arg.startswith("--"):
            scripted = scripted or arg.startswith(("--expression", "--file"))
        elif arg.startswith("-") and len(arg) > 1:
            flags = arg[1:].split("i", 1)[0]  # what follows -i is its backup suffix
            if any(f in flags for f in script_flags):
                scripted, skip = True, flags[-1] in script_flags
        else:
            files.append(arg)
    return files if scripted else files[1:]


def _sed(name: str, args: list[str], stdin: _Stdin, in_tmp: bool, depth: int) -> list[_Fact]:
    """`sed -i` / `--in-place` edits its files; any other sed only prints."""
    in_place = any(a.startswith("--in-place") or re.match(r"-[nrEsuz]*i", a) for a in args)
    return [_writes(_sed_like_files(args, "ef"), in_tmp)] if in_place else [_READ]


_AWK_OUTPUT = re.compile(r"""\bprintf?\b[^;{}]*?>>?\s*(?:"(?P<path>[^"]*)"|\S)""")


def _awk(name: str, args: list[str], stdin: _Stdin, in_tmp: bool, depth: int) -> list[_Fact]:
    """awk prints, unless its program redirects `print > "file"` (an edit of that file),
    calls system() or edits in place (gawk -i inplace)."""
    if "inplace" in args:
        return [_EDIT]
    program = " ".join(_strip_options(args, frozenset({"-F", "-v", "-f"}))[:1])
    if "system(" in program:
        return [_OTHER]
    writes = [m["path"] for m in _AWK_OUTPUT.finditer(program)]
    if not writes:
        return [_READ]
    return [_writes([p for p in writes if p is not None], in_tmp) if all(writes) else _OTHER]


def _tee(name: str, args: list[str], stdin: _Stdin, in_tmp: bool, depth: int) -> list[_Fact]:
    return [_writes(_positionals(args), in_tmp) if _positionals(args) else _READ]


def _checksum(name: str, args: list[str], stdin: _Stdin, in_tmp: bool, depth: int) -> list[_Fact]:
    """`sha256sum -c SUMS` checks files against expected sums; otherwise it prints."""
    return [_TEST if any(a in ("-c", "--check") for a in args) else _READ]


def _archive(name: str, args: list[str], stdin: _Stdin, in_tmp: bool, depth: int) -> list[_Fact]:
    """tar / unzip: listing an archive only reads; (un)packing is a file operation."""
    if name == "tar":
        mode = args[0].lstrip("-") if args and not args[0].startswith("--") else ""
        listing = "t" in mode or "--list" in args or any(re.fullmatch(r"-\w*t\w*", a) for a in args)
    else:
        listing = any(a in ("-l", "-Z", "-v", "-t") for a in args)
    return [_READ if listing else _FILE_OP]


def _sort(name: str, args: list[str], stdin: _Stdin, in_tmp: bool, depth: int) -> list[_Fact]:
    for i, arg in enumerate(args):
        if arg.startswith("-o") or arg.startswith("--output"):
            path = arg[2:] if arg.startswith("-o") and arg[2:] else arg.partition("=")[2]
            return [_write(path or (args[i + 1] if i + 1 < len(args) else ""), in_tmp)]
    return [_READ]


def _dd(name: str, args: list[str], stdin: _Stdin, in_tmp: bool, depth: int) -> list[_Fact]:
    outputs = [a[3:] for a in args if a.startswith("of=")]
    return [_writes(outputs, in_tmp) if outputs else _READ]


def _patch(name: str, args: list[str], stdin: _Stdin, in_tmp: bool, depth: int) -> list[_Fact]:
    """patch changes the files its diff names (a check with --dry-run)."""
    return [_TEST if "--dry-run" in args else _EDIT]


def _formatter(name: str, args: list[str], stdin: _Stdin, in_tmp: bool, depth: int) -> list[_Fact]:
    """A formatter or linter is a check when it only checks (`black --check`, `ruff check`)
    and edits when it rewrites files (`black .`, `ruff check --fix`, `prettier --write`)."""
    if name == "ruff":
        sub = (_positionals(args) or ["check"])[0]
        checking = sub != "format" or "--check" in args or "--diff" in args
        rewriting = "--fix" in args or (sub == "format" and not checking)
    else:
        check_flags, write_flags, writes_by_default = _FORMATTERS[name]
        checking = any(a in check_flags for a in args)
        rewriting = any(a in write_flags for a in args) or (writes_by_default and not checking)
    facts = [_TEST] if checking or not rewriting else []
    return [*facts, _EDIT] if rewriting else facts


_SQL_READS = re.compile(
    r"(?:(?:select|with|explain)\b.*|pragma\s+[\w.]+(?:\s*\(.*\))?"
    r"|\.(?:tables|schema|indexes|indices|headers?|mode|width|dump|databases|show|help|quit"
    r"|exit|nullvalue|separator)\b.*)",
    re.IGNORECASE | re.DOTALL,
)
"""A statement that only queries (a PRAGMA with `=` sets, so it is not one)."""


def _sqlite(name: str, args: list[str], stdin: _Stdin, in_tmp: bool, depth: int) -> list[_Fact]:
    """sqlite3 DB [SQL]: only reads when every statement is a query (SELECT, PRAGMA x,
    .tables, .schema, ...); other SQL, or SQL from a file or pipe, runs code."""
    operands = _strip_options(args, frozenset({"-cmd", "-separator", "-init", "-newline"}))
    sql = " ".join(operands[1:]) if len(operands) > 1 else stdin.code
    if sql is None:
        return [_RUN] if stdin.fed else [_OTHER]  # SQL from a file or pipe; or interactive
    # dot-commands take a line each; SQL statements end at `;` and may span lines
    lines = sql.splitlines()
    dot = [line for line in lines if line.strip().startswith(".")]
    rest = " ".join(line for line in lines if not line.strip().startswith("."))
    statements = [s.strip() for s in [*dot, *rest.split(";")] if s.strip()]
    return [_READ if all(_SQL_READS.fullmatch(s) for s in statements) else _RUN]


def _git(name: str, args: list[str], stdin: _Stdin, in_tmp: bool, depth: int) -> list[_Fact]:
    """git: inspecting subcommands read (`branch`, `tag`, `remote`, `stash`, `config` only
    when they list); `git diff --no-index` compares files, a check."""
    rest = _strip_options(args, frozenset({"-C", "-c", "--git-dir", "--work-tree"}))
    sub, more = (rest[0], rest[1:]) if rest else ("", [])
    if sub == "diff" and "--no-index" in more:
        return [_TEST]
    listing = {
        "branch": not _positionals(more) or "--list" in more,
        "tag": not _positionals(more) or "-l" in more or "--list" in more,
        "remote": not _positionals(more) or _positionals(more)[0] in ("show", "get-url"),
        "stash": _positionals(more)[:1] in (["list"], ["show"]),
        "config": any(m.startswith(("--get", "--list", "-l")) for m in more)
        or len(_positionals(more)) == 1,
    }
    if sub in listing:
        return [_READ if listing[sub] else _OTHER]
    return [_SUBCOMMANDS["git"].get(sub, _OTHER)]


def _tsc(name: str, args: list[str], stdin: _Stdin, in_tmp: bool, depth: int) -> list[_Fact]:
    return [_TEST if "--noEmit" in args else _RUN]
