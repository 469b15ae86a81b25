"""The rules for programs whose behaviour depends on their arguments (`sed -i`,
`git diff --no-index`, `black --check`, `sqlite3` with a query, ...), and the path and
argument helpers they share with `turnbon_graph.analysis.behaviours.facts`."""

from __future__ import annotations

import re

from turnbon_graph.analysis.behaviours.scanner import Stdin
from turnbon_graph.analysis.behaviours.tables import (
    EDIT,
    FILE_OP,
    FORMATTERS,
    INSTALL,
    NODE_INSTALL,
    NODE_READ,
    OTHER,
    READ,
    RUN,
    SUBCOMMANDS,
    TEST,
    TESTY,
    Fact,
)


def is_scratch(path: str, in_tmp: bool) -> bool:
    """Under /tmp (written there, or relative after `cd /tmp`): writes do not count."""
    if path.startswith(("$TMPDIR", "${TMPDIR")):
        return True
    if not path.startswith(("/", "~", "$")):
        return in_tmp
    return path in ("/tmp", "/var/tmp") or path.startswith(("/tmp/", "/var/tmp/"))


def write_fact(path: str, in_tmp: bool) -> Fact:
    """Writing to `path`: an edit, unless it is a device (/dev/null) or scratch (/tmp)."""
    if path.startswith("/dev/"):
        return READ
    return OTHER if is_scratch(path, in_tmp) else EDIT


def _writes(paths: list[str], in_tmp: bool) -> Fact:
    """Writing several files (`tee a b`, `sed -i ... a b`)."""
    kinds = [write_fact(p, in_tmp) for p in paths] or [EDIT]
    return EDIT if EDIT in kinds else OTHER if OTHER in kinds else READ


def strip_options(args: list[str], valued: frozenset[str]) -> list[str]:
    """`args` after the leading options (and the values of those in `valued`)."""
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "-":
        if args[i] == "--":
            return args[i + 1 :]
        i += 2 if args[i] in valued else 1
    return args[i:]


def positionals(args: list[str]) -> list[str]:
    """The arguments that are not options (do not start with `-`)."""
    return [a for a in args if not a.startswith("-")]


def program_name(word: str) -> str:
    """A program's name: its basename, with `pip3.11` as `pip`."""
    name = word.rsplit("/", 1)[-1]
    return "pip" if re.fullmatch(r"pip\d*(?:\.\d+)?", name) else name


def testy_path(path: str) -> bool:
    """Whether a path names a test file, or a file under a `test` or `tests` folder."""
    parts = path.split("/")
    return bool(TESTY.search(parts[-1])) or any(p in ("test", "tests") for p in parts[:-1])


# ---------------------------------------------------------------------------------------
# Python code


_PY_OPEN = re.compile(
    r"""\bopen\(\s*(?P<path>[^,()]+?)\s*,\s*(?:mode\s*=\s*)?[rRbBuU]?(['"])(?P<mode>[^'"]*)\2"""
)
_PY_WRITE_PATH = re.compile(r"""\.write_(?:text|bytes)\(""")
_PY_PATH_LITERAL = re.compile(r"""Path\(\s*(?P<path>[rRbBfF]*(['"])[^'"]*\2)\s*\)\s*$""")
_PY_STRING = re.compile(r"""[rRbBfF]*(['"])(?P<value>[^'"]*)\1""")
_PY_ASSERT = re.compile(r"(?m)(?:^|;)\s*assert\b")


def python_code(code: str, in_tmp: bool) -> list[Fact]:
    """Python source that runs: a test when it asserts; an edit for each file it opens for
    writing (`open(path, 'w'|'a'|'x'|'+')`, `Path(path).write_text(...)`). A literal path
    under /tmp does not count; a computed path counts unless the code names /tmp or
    tempfile anywhere (then it may well be scratch, and we do not guess)."""
    facts = [TEST if _PY_ASSERT.search(code) else RUN]
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
            facts.append(write_fact(literal["value"], in_tmp))
        elif not scratchy:
            facts.append(EDIT)
    return facts


# ---------------------------------------------------------------------------------------
# Programs judged by their arguments


def node_manager(name: str, sub: str, positional: list[str]) -> Fact:
    """npm / yarn / pnpm / bun: install, test, run a script (a test when its name is)."""
    if sub in NODE_INSTALL or (name == "yarn" and not sub):
        return INSTALL
    if sub in ("test", "t"):
        return TEST
    if sub in NODE_READ:
        return READ
    if sub == "run":
        script = positional[1] if len(positional) > 1 else ""
        return TEST if TESTY.search(script) else RUN if script else READ
    if sub in ("start", "build", "dev", "serve") or (sub and name in ("yarn", "pnpm", "bun")):
        return TEST if TESTY.search(sub) else RUN  # `yarn lint`, `bun index.ts`
    return OTHER


def rule_interpreter(
    name: str, args: list[str], stdin: Stdin, in_tmp: bool, depth: int
) -> list[Fact]:
    """node / deno / ruby / perl: `perl -pi -e` edits in place; `-c` / `--check` (syntax
    checks), `node --test`, `deno test` and test-named scripts are tests; else runs code."""
    if name == "perl" and any(re.fullmatch(r"-[plnaws0]*i\S*", a) for a in args):
        return [_writes(_sed_like_files(args, "e"), in_tmp)]
    if any(a in ("--test", "--check") or (a == "-c" and name != "deno") for a in args):
        return [TEST]  # deno's -c is --config
    scripts = positionals(args)
    if scripts and (scripts[0] == "test" or testy_path(scripts[0])):
        return [TEST]
    return [RUN]


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


def rule_sed(name: str, args: list[str], stdin: Stdin, in_tmp: bool, depth: int) -> list[Fact]:
    """`sed -i` / `--in-place` edits its files; any other sed only prints."""
    in_place = any(a.startswith("--in-place") or re.match(r"-[nrEsuz]*i", a) for a in args)
    return [_writes(_sed_like_files(args, "ef"), in_tmp)] if in_place else [READ]


_AWK_OUTPUT = re.compile(r"""\bprintf?\b[^;{}]*?>>?\s*(?:"(?P<path>[^"]*)"|\S)""")


def rule_awk(name: str, args: list[str], stdin: Stdin, in_tmp: bool, depth: int) -> list[Fact]:
    """awk prints, unless its program redirects `print > "file"` (an edit of that file),
    calls system() or edits in place (gawk -i inplace)."""
    if "inplace" in args:
        return [EDIT]
    program = " ".join(strip_options(args, frozenset({"-F", "-v", "-f"}))[:1])
    if "system(" in program:
        return [OTHER]
    writes = [m["path"] for m in _AWK_OUTPUT.finditer(program)]
    if not writes:
        return [READ]
    return [_writes([p for p in writes if p is not None], in_tmp) if all(writes) else OTHER]


def rule_tee(name: str, args: list[str], stdin: Stdin, in_tmp: bool, depth: int) -> list[Fact]:
    """tee writes the files it names; without one it only passes its input on."""
    return [_writes(positionals(args), in_tmp) if positionals(args) else READ]


def rule_checksum(name: str, args: list[str], stdin: Stdin, in_tmp: bool, depth: int) -> list[Fact]:
    """`sha256sum -c SUMS` checks files against expected sums; otherwise it prints."""
    return [TEST if any(a in ("-c", "--check") for a in args) else READ]


def rule_archive(name: str, args: list[str], stdin: Stdin, in_tmp: bool, depth: int) -> list[Fact]:
    """tar / unzip: listing an archive only reads; (un)packing is a file operation."""
    if name == "tar":
        mode = args[0].lstrip("-") if args and not args[0].startswith("--") else ""
        listing = "t" in mode or "--list" in args or any(re.fullmatch(r"-\w*t\w*", a) for a in args)
    else:
        listing = any(a in ("-l", "-Z", "-v", "-t") for a in args)
    return [READ if listing else FILE_OP]


def rule_sort(name: str, args: list[str], stdin: Stdin, in_tmp: bool, depth: int) -> list[Fact]:
    """sort writes the file of `-o`/`--output`; otherwise it prints."""
    for i, arg in enumerate(args):
        if arg.startswith("-o") or arg.startswith("--output"):
            path = arg[2:] if arg.startswith("-o") and arg[2:] else arg.partition("=")[2]
            return [write_fact(path or (args[i + 1] if i + 1 < len(args) else ""), in_tmp)]
    return [READ]


def rule_dd(name: str, args: list[str], stdin: Stdin, in_tmp: bool, depth: int) -> list[Fact]:
    """dd writes the file of `of=`; otherwise it prints."""
    outputs = [a[3:] for a in args if a.startswith("of=")]
    return [_writes(outputs, in_tmp) if outputs else READ]


def rule_patch(name: str, args: list[str], stdin: Stdin, in_tmp: bool, depth: int) -> list[Fact]:
    """patch changes the files its diff names (a check with --dry-run)."""
    return [TEST if "--dry-run" in args else EDIT]


def rule_formatter(
    name: str, args: list[str], stdin: Stdin, in_tmp: bool, depth: int
) -> list[Fact]:
    """A formatter or linter is a check when it only checks (`black --check`, `ruff check`)
    and edits when it rewrites files (`black .`, `ruff check --fix`, `prettier --write`)."""
    if name == "ruff":
        sub = (positionals(args) or ["check"])[0]
        checking = sub != "format" or "--check" in args or "--diff" in args
        rewriting = "--fix" in args or (sub == "format" and not checking)
    else:
        check_flags, write_flags, writes_by_default = FORMATTERS[name]
        checking = any(a in check_flags for a in args)
        rewriting = any(a in write_flags for a in args) or (writes_by_default and not checking)
    facts = [TEST] if checking or not rewriting else []
    return [*facts, EDIT] if rewriting else facts


_SQL_READS = re.compile(
    r"(?:(?:select|with|explain)\b.*|pragma\s+[\w.]+(?:\s*\(.*\))?"
    r"|\.(?:tables|schema|indexes|indices|headers?|mode|width|dump|databases|show|help|quit"
    r"|exit|nullvalue|separator)\b.*)",
    re.IGNORECASE | re.DOTALL,
)
"""A statement that only queries (a PRAGMA with `=` sets, so it is not one)."""


def rule_sqlite(name: str, args: list[str], stdin: Stdin, in_tmp: bool, depth: int) -> list[Fact]:
    """sqlite3 DB [SQL]: only reads when every statement is a query (SELECT, PRAGMA x,
    .tables, .schema, ...); other SQL, or SQL from a file or pipe, runs code."""
    operands = strip_options(args, frozenset({"-cmd", "-separator", "-init", "-newline"}))
    sql = " ".join(operands[1:]) if len(operands) > 1 else stdin.code
    if sql is None:
        return [RUN] if stdin.fed else [OTHER]  # SQL from a file or pipe; or interactive
    # dot-commands take a line each; SQL statements end at `;` and may span lines
    lines = sql.splitlines()
    dot = [line for line in lines if line.strip().startswith(".")]
    rest = " ".join(line for line in lines if not line.strip().startswith("."))
    statements = [s.strip() for s in [*dot, *rest.split(";")] if s.strip()]
    return [READ if all(_SQL_READS.fullmatch(s) for s in statements) else RUN]


def rule_git(name: str, args: list[str], stdin: Stdin, in_tmp: bool, depth: int) -> list[Fact]:
    """git: inspecting subcommands read (`branch`, `tag`, `remote`, `stash`, `config` only
    when they list); `git diff --no-index` compares files, a check."""
    rest = strip_options(args, frozenset({"-C", "-c", "--git-dir", "--work-tree"}))
    sub, more = (rest[0], rest[1:]) if rest else ("", [])
    if sub == "diff" and "--no-index" in more:
        return [TEST]
    listing = {
        "branch": not positionals(more) or "--list" in more,
        "tag": not positionals(more) or "-l" in more or "--list" in more,
        "remote": not positionals(more) or positionals(more)[0] in ("show", "get-url"),
        "stash": positionals(more)[:1] in (["list"], ["show"]),
        "config": any(m.startswith(("--get", "--list", "-l")) for m in more)
        or len(positionals(more)) == 1,
    }
    if sub in listing:
        return [READ if listing[sub] else OTHER]
    return [SUBCOMMANDS["git"].get(sub, OTHER)]


def rule_tsc(name: str, args: list[str], stdin: Stdin, in_tmp: bool, depth: int) -> list[Fact]:
    """tsc is a check with `--noEmit`; otherwise it builds (runs)."""
    return [TEST if "--noEmit" in args else RUN]
