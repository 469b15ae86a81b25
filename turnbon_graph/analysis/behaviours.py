"""Behaviour tags of a shell action: the eight behaviours of Figure 4 of the Turn-BoN paper
(seeds/000_9df8407a3ab7c393.txt), defined in its Table 4.

`tag_command(command, history)` says which behaviours one action's shell command line
shows, given the commands (and exit codes) that the earlier turns executed. The analyses
call it for every candidate of a turn, and `declares_complete(text)` for a candidate that
answers with text and no command.

The model, in four steps:

1. Scan (`_Scanner`): the line becomes words and operators under bash's quoting rules
   ('...', "...", $'...', backslashes, line continuations), with comments dropped,
   `$( )`, backtick and `<( )` substitutions kept as nested command lines, and heredoc
   bodies attached to their `<<` operator: a body is data, unless the program reading it
   is a shell or Python (`bash <<EOF`, `python - <<EOF`), when it is code. `shlex` is not
   the core because it cannot tell an operator from a quoted one (`find -exec rm {} \\;`),
   splits `$(...)` apart and knows no heredocs. A line that does not scan (an unclosed quote
   or substitution) does not raise: it is scanned again with quotes taken as ordinary
   characters, a best-effort word split.
2. Parse (`_parse`): words and operators become simple commands (argv, redirections,
   substitutions) in textual order. Pipelines, lists (`&&`, `||`, `;`, `&`, newlines),
   `( )` / `{ }` groups and `if` / `for` / `while` / `case` keywords only separate simple
   commands: every branch is assumed to run.
3. Facts (`_Fact`): each simple command, once prefixes such as `sudo`, `env VAR=1`,
   `timeout 10`, `xargs` or `uv run` are stripped, is looked up in tables of program names
   and becomes what it does: reads, edits a file, runs code, runs a test or check, a file
   operation, installs, declares the task complete. `bash -c '...'`, `bash <<EOF`,
   `find -exec` and substitutions are analysed recursively; Python code (`python -c`,
   `python - <<EOF`) is searched for `open(..., 'w')` and `assert`. A program in no table is
   unknown: it shows no behaviour and is not read-only.
4. Tags: a behaviour is present when a fact shows it; `read_only` when every fact is a
   read; `tests_last_edit` and `loops` also look at the history.

Judgement calls where Table 4 is silent are documented at the tables below.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import NamedTuple

TAGS: tuple[str, ...] = (
    "edits_file",
    "tests_last_edit",
    "runs_test",
    "file_ops",
    "installs_package",
    "read_only",
    "loops",
    "declares_complete",
)
"""The behaviours, in the order of Figure 4 and Table 4 (the extracted paper text lacks the
rows for the last two, which keep the order they were specified in)."""


class Executed(NamedTuple):
    """One earlier turn's executed command and its exit code (None: unknown)."""

    command: str
    exit_code: int | None


def tag_command(command: str, history: Sequence[tuple[str, int | None]] | None = None) -> set[str]:
    """The behaviours (names from `TAGS`) that the shell command line `command` shows.

    `history` holds the earlier turns' executed commands and exit codes, oldest first
    (plain tuples or `Executed`); it decides `tests_last_edit` and `loops`. Never raises:
    a line that does not parse is tagged from a best-effort word split."""
    history = list(history or [])
    facts = _line_facts(command)
    tags: set[str] = set()
    if any(f.edits for f in facts):
        tags.add("edits_file")
    if _runs_untested_edit(facts, history):
        tags.add("tests_last_edit")
    if any(f.test for f in facts):
        tags.add("runs_test")
    if any(f.file_op for f in facts):
        tags.add("file_ops")
    if any(f.install for f in facts):
        tags.add("installs_package")
    # A bare `echo done` declares only when it is the whole action, not after `make &&`.
    declares = any(f.declares for f in facts) or (len(facts) == 1 and facts[0].says_done)
    if declares:
        tags.add("declares_complete")
    if facts and all(f.read for f in facts) and not declares:
        tags.add("read_only")
    if history and _repeats_failure(command, history[-1]):
        tags.add("loops")
    return tags


def declares_complete(text: str) -> bool:
    """Whether an action's text (a final message with no command) declares the task
    complete: it opens with "Done" / "Complete" / "Finished", or a sentence says that the
    task (the work, everything) is complete / done / finished / solved, that the agent
    completed the task, or that nothing more is needed, with no negation in that sentence
    ("not", "n't", "cannot", "unable", "incomplete"). Conservative: a summary of what was
    done that never says the task is complete does not count."""
    if _OPENS_DONE.match(text) and not _NEGATION.search(_SENTENCE_END.split(text, 1)[0]):
        return True
    return any(
        _COMPLETION.search(sentence) and not _NEGATION.search(sentence)
        for sentence in _SENTENCE_END.split(text)
    )


# ---------------------------------------------------------------------------------------
# Declaring completion and looping

_COMPLETION = re.compile(
    r"""\b(?:
        (?:the\s+|this\s+|my\s+|your\s+)?(?:task|work|job|implementation|everything)
            \s+(?:(?:is|has\s+been|was)\s+)?(?:now\s+)?
            (?:complete|completed|done|finished|solved|accomplished)
      | all\s+tasks\s+(?:are\s+)?(?:complete|completed|done|finished)
      | (?:completed|finished|solved|accomplished)\s+(?:the|this|your)\s+task
      | nothing\s+(?:more|else)\s+(?:is\s+)?(?:needed|required|to\s+do)
      | task[_\s-]?complete | complete_task_and_submit_final_output
      | mini_swe_agent_final_output
    )\b""",
    re.IGNORECASE | re.VERBOSE,
)
"""A sentence that names the task complete; also the submission markers that harnesses
read from a command's output (mini-SWE-agent's COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT)."""

_OPENS_DONE = re.compile(
    r"\s*(?:all\s+)?(?:done|complete|completed|finished)\s*(?:[.!:,;\u2014-]|$)", re.IGNORECASE
)
"""A message that opens with the word alone: "Done.", "Done: the solution ran." (not
"Complete rewrite needed")."""
_NEGATION = re.compile(r"\b(?:not|never|cannot|unable|incomplete)\b|n't\b", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")

_BARE_DONE = frozenset({"done", "all done", "complete", "completed", "finished", "submitted"})
"""What `echo` may print to declare completion when it is the whole action (`echo DONE`);
after other commands (`make && echo done`) it only reports progress."""

_SUBMIT_PROGRAMS = frozenset({"submit"})
"""Commands that submit in agent harnesses (SWE-agent's `submit`)."""


def _normalise(command: str) -> str:
    return " ".join(command.split())


def _repeats_failure(command: str, previous: tuple[str, int | None]) -> bool:
    """Loops on a command: the same line (up to whitespace) as the previous executed
    command, which failed (a known, non-zero exit code)."""
    before, exit_code = previous
    line = _normalise(command)
    return bool(line) and exit_code not in (None, 0) and _normalise(before) == line


def _runs_untested_edit(facts: list[_Fact], history: list[tuple[str, int | None]]) -> bool:
    """Tests its last edit (Table 4): "Runs code while the latest edit is untested, i.e., no
    turn since the edit has run or tested anything." The history is replayed in order: an
    edit leaves the workspace untested, running code or a test or check tests it. Within
    one line the same holds in textual order (`cat > a.py <<EOF ... EOF && python a.py`).
    The run need not touch the edited file: the definition does not ask for it."""
    untested = False
    for earlier, _ in history:
        _, untested = _replay(_cached_facts(earlier), untested)
    ran_untested, _ = _replay(facts, untested)
    return ran_untested


@functools.lru_cache(maxsize=4096)
def _cached_facts(command: str) -> tuple[_Fact, ...]:
    """A history command's facts: an analysis replays the same history for every turn."""
    return tuple(_line_facts(command))


def _replay(facts: Sequence[_Fact], untested: bool) -> tuple[bool, bool]:
    """(whether code ran while an edit was untested, whether an edit is untested after)."""
    ran_untested = False
    for fact in facts:
        if fact.runs:
            ran_untested = ran_untested or untested
            untested = False
        if fact.edits:
            untested = True
    return ran_untested, untested


# ---------------------------------------------------------------------------------------
# Facts


@dataclass(frozen=True)
class _Fact:
    """What one program, or one redirection, of a command line does."""

    read: bool = False
    """Only reads or inspects (or changes nothing, like `cd`, `export`, `sleep`)."""
    edits: bool = False
    """Changes a file in the workspace (writes into /tmp and /dev do not count)."""
    runs: bool = False
    """Runs code, a test or a check: what makes an earlier edit tested."""
    test: bool = False
    file_op: bool = False
    install: bool = False
    declares: bool = False
    says_done: bool = False
    """Prints a bare "done": declares completion only as the whole action."""


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


_READ = _Fact(read=True)
_OTHER = _Fact()
"""Changes something none of the behaviours names, or an unknown program."""
_RUN = _Fact(runs=True)
_TEST = _Fact(runs=True, test=True)
_EDIT = _Fact(edits=True)
_FILE_OP = _Fact(file_op=True)
_INSTALL = _Fact(install=True)
_DECLARE = _Fact(declares=True)

_READ_PROGRAMS = _names("""
    ls ll dir tree pwd cat tac head tail less more nl wc grep egrep fgrep rg ag ack zcat
    zgrep bzcat xzcat zless file stat du df find locate which whereis type whoami id groups
    uname hostname date cal uptime free nproc lscpu lsblk lsb_release ps pgrep pstree top
    htop vmstat iostat lsof ss netstat env printenv locale echo printf cut tr sort uniq paste
    join comm fold fmt column rev expand unexpand seq basename dirname realpath readlink jq
    yq xxd hexdump od strings readelf objdump nm ldd size md5sum sha1sum sha256sum sha512sum
    cksum base64 man info apropos history test [ [[ getent ulimit tput
    """)
"""Known read or inspect commands. `echo`/`printf` print to stdout (a redirect is judged on
its own). `test`/`[` inspect rather than "run a test". `find`, `sed`, `awk`, `sort`, `tee`,
`sqlite3`, `tar`, `unzip`, `git` and the checksum tools have their own rules below."""

_NEUTRAL = _names("""
    cd pushd popd export set unset shopt alias unalias true false : sleep wait read umask
    hash trap exit return break continue clear reset shift local declare typeset
    """)
"""Builtins that change nothing on disk; they count as reads (`cd /app && ls` only reads)."""

_FILE_OPS = _names("""
    cp mv rm rmdir unlink shred rename mkdir touch ln install rsync chmod chown chgrp
    truncate zip gzip gunzip bzip2 bunzip2 xz unxz zstd 7z 7za rar unrar kill pkill killall
    """)
"""File operations (Table 4: "Moves, copies, deletes, or archives files, changes
permissions, or stops processes."). Judgement call: `mkdir`, `touch`, `ln`, `install`,
`rsync` and `truncate` are also file operations rather than edits; `cp`/`mv` into the
workspace are file operations, not edits (Table 4's example `cp out.txt /app/`)."""

_TEST_PROGRAMS = _names("""
    pytest py.test tox nox jest mocha vitest ava karma rspec phpunit ctest bats shellcheck
    flake8 pylint mypy pyright pyflakes pycodestyle pydocstyle bandit eslint tslint stylelint
    hadolint yamllint xmllint cppcheck clang-tidy staticcheck golangci-lint golint cmp diff
    """)
"""Tests, checkers, and comparisons against expected output (Table 4: "Runs a test,
checker, or comparison against expected output"; `diff -u out.txt expected.txt`)."""

_COMPILERS = _names("gcc g++ cc c++ clang clang++ rustc javac kotlinc zig nasm as")
"""Compiling runs the toolchain over the code (it makes an edit tested) but is a test only
as a syntax check (`-fsyntax-only`)."""

_BUILD_TOOLS = _names("make gmake cmake ninja mvn gradle gradlew ant meson bazel")
"""Building runs code; with a test-like target (`make test`, `mvn verify`) it is a test."""

_RUNNERS = _names("""
    uvicorn gunicorn hypercorn flask streamlit celery jupyter ipython gdb valgrind java
    dotnet swift groovy scala kotlin elixir erl psql mysql redis-cli php lua luajit
    Rscript julia ts-node tsx
    """)
"""Programs that run code given to them (servers, interpreters and database clients not
handled by their own rule). Judgement call: `source` / `.` are not here: agents source
virtualenv activation scripts, which changes nothing and tests nothing (they are _OTHER)."""

_SHELLS = _names("bash sh zsh dash ksh")
_SCRIPT_INTERPRETERS = _names("node nodejs deno ruby perl")
_PYTHON = re.compile(r"(?:python|pypy)(?:\d+(?:\.\d+)*)?")

_VERSION_ARGS = frozenset({"--version", "-V", "-v", "-version", "version", "--help", "-h"})
"""`prog --version` alone only inspects (not for test runners: `pytest -v` runs tests)."""

_TESTY = re.compile(
    r"(?:^|[_.:-])(?:tests?|check|checks|checker|lint|verify|validate|typecheck|unittest)"
    r"(?:[_.:-]|$)",
    re.IGNORECASE,
)
"""A script, module, make target or npm script that is a test or check: `test_app.py`,
`run_tests.sh`, `check.py`, `make test`, `npm run test:unit` (not `contest.py`)."""

_PREFIXES: dict[str, frozenset[str]] = {
    "sudo": frozenset({"-u", "-g", "-h", "-p", "-C", "-D", "-U", "-r", "-t"}),
    "env": frozenset({"-u", "-C", "-S"}),
    "timeout": frozenset({"-s", "-k", "--signal", "--kill-after"}),
    "nice": frozenset({"-n", "--adjustment"}),
    "ionice": frozenset({"-c", "-n", "-p"}),
    "nohup": frozenset(),
    "time": frozenset({"-f", "-o"}),
    "exec": frozenset({"-a"}),
    "command": frozenset(),
    "builtin": frozenset(),
    "stdbuf": frozenset({"-i", "-o", "-e"}),
    "unbuffer": frozenset(),
    "xargs": frozenset({"-I", "-i", "-n", "-P", "-d", "-L", "-a", "-s", "-E", "-e"}),
    "npx": frozenset({"-p", "--package"}),
    "bunx": frozenset(),
    "pnpx": frozenset(),
    "watch": frozenset({"-n", "-d"}),
}
"""Prefixes that run the command after them; the options of each that take a value."""

_SUB_PREFIXES: dict[tuple[str, str], frozenset[str]] = {
    ("uv", "run"): frozenset({"--with", "--python", "-p", "--project", "--directory"}),
    ("poetry", "run"): frozenset(),
    ("pipenv", "run"): frozenset(),
    ("pdm", "run"): frozenset(),
    ("hatch", "run"): frozenset(),
    ("conda", "run"): frozenset({"-n", "--name", "-p", "--prefix"}),
    ("mamba", "run"): frozenset({"-n", "--name", "-p", "--prefix"}),
    ("micromamba", "run"): frozenset({"-n", "--name", "-p", "--prefix"}),
    ("bundle", "exec"): frozenset(),
    ("npm", "exec"): frozenset(),
    ("pnpm", "exec"): frozenset(),
    ("pnpm", "dlx"): frozenset(),
    ("yarn", "dlx"): frozenset(),
}
"""Two-word prefixes (`uv run pytest`, `poetry run python x.py`)."""

_SUBCOMMANDS: dict[str, dict[str, _Fact]] = {
    "pip": {
        "install": _INSTALL,
        "list": _READ,
        "show": _READ,
        "freeze": _READ,
        "check": _READ,
        "help": _READ,
    },
    "apt": {"install": _INSTALL, "list": _READ, "search": _READ, "show": _READ, "policy": _READ},
    "apt-get": {"install": _INSTALL},
    "apt-cache": {"search": _READ, "show": _READ, "policy": _READ, "depends": _READ},
    "yum": {"install": _INSTALL, "list": _READ, "info": _READ, "search": _READ},
    "dnf": {"install": _INSTALL, "list": _READ, "info": _READ, "search": _READ},
    "zypper": {"install": _INSTALL, "in": _INSTALL, "search": _READ},
    "apk": {"add": _INSTALL, "info": _READ, "search": _READ},
    "brew": {"install": _INSTALL, "list": _READ, "info": _READ, "search": _READ},
    "snap": {"install": _INSTALL, "list": _READ},
    "gem": {"install": _INSTALL, "list": _READ},
    "bundle": {"install": _INSTALL, "add": _INSTALL},
    "composer": {"install": _INSTALL, "require": _INSTALL, "show": _READ},
    "conda": {"install": _INSTALL, "create": _INSTALL, "list": _READ, "info": _READ},
    "mamba": {"install": _INSTALL, "create": _INSTALL, "list": _READ},
    "micromamba": {"install": _INSTALL, "create": _INSTALL, "list": _READ},
    "poetry": {"add": _INSTALL, "install": _INSTALL, "show": _READ, "check": _TEST},
    "pipenv": {"install": _INSTALL, "graph": _READ},
    "pipx": {"install": _INSTALL, "list": _READ},
    "pdm": {"add": _INSTALL, "install": _INSTALL, "list": _READ},
    "uv": {"add": _INSTALL, "sync": _INSTALL, "tool": _INSTALL},
    "opam": {"install": _INSTALL, "list": _READ},
    "luarocks": {"install": _INSTALL, "list": _READ},
    "nix-env": {"-i": _INSTALL, "--install": _INSTALL, "-q": _READ},
    "go": {
        "test": _TEST,
        "vet": _TEST,
        "run": _RUN,
        "build": _RUN,
        "generate": _RUN,
        "install": _INSTALL,
        "get": _INSTALL,
        "fmt": _EDIT,
        "version": _READ,
        "env": _READ,
        "list": _READ,
        "doc": _READ,
    },
    "cargo": {
        "test": _TEST,
        "check": _TEST,
        "clippy": _TEST,
        "build": _RUN,
        "run": _RUN,
        "bench": _RUN,
        "install": _INSTALL,
        "add": _INSTALL,
        "fmt": _EDIT,
        "tree": _READ,
        "metadata": _READ,
    },
    "dotnet": {"test": _TEST, "run": _RUN, "build": _RUN, "add": _INSTALL, "restore": _INSTALL},
    "git": {
        "status": _READ,
        "log": _READ,
        "diff": _READ,
        "show": _READ,
        "blame": _READ,
        "ls-files": _READ,
        "ls-tree": _READ,
        "rev-parse": _READ,
        "rev-list": _READ,
        "describe": _READ,
        "shortlog": _READ,
        "grep": _READ,
        "reflog": _READ,
        "cat-file": _READ,
        "check-ignore": _READ,
        "help": _READ,
        "version": _READ,
        "mv": _FILE_OP,
        "rm": _FILE_OP,
        "apply": _EDIT,
        "am": _EDIT,
    },
}
"""Tools judged by their first positional argument; a subcommand not listed is _OTHER.
`apt-get update`, `git commit`, `git checkout` change something no behaviour names.
Judgement call: `git apply` / `git am` (like `patch`) change workspace files, so they edit."""

_FLAG_TOOLS: dict[str, dict[str, _Fact]] = {
    "pacman": {"-S": _INSTALL, "-Sy": _INSTALL, "-Syu": _INSTALL, "-U": _INSTALL, "-Q": _READ},
    "dpkg": {"-i": _INSTALL, "--install": _INSTALL, "-l": _READ, "-L": _READ, "-s": _READ},
}
"""Package managers judged by their first known flag (`dpkg -i`, `dpkg -l`)."""

_NODE_MANAGERS = frozenset({"npm", "yarn", "pnpm", "bun"})
_NODE_INSTALL = frozenset({"install", "i", "ci", "add", "in", "isntall"})
_NODE_READ = frozenset({"ls", "list", "view", "info", "outdated", "why", "config", "root"})

_WRITE_REDIRECTS = frozenset({">", ">>", ">|", "&>", "&>>", ">&", "<>"})
_HEREDOC_OPS = frozenset({"<<", "<<-"})
_REDIRECTS = _WRITE_REDIRECTS | _HEREDOC_OPS | {"<", "<<<", "<&"}
_OPERATORS = sorted(
    {"&&", "||", ";;", ";&", ";;&", "|&", "&", ";", "|", "(", ")", "\n", *_REDIRECTS},
    key=len,
    reverse=True,
)
_OPERATOR_CHARS = frozenset("&;|()<>")
_RESERVED = _names("if then elif else fi do done while until ! { } esac")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[[^]]*\])?\+?=")
_MAX_DEPTH = 8
"""How deep `bash -c "bash -c ..."` and substitutions are followed."""


# ---------------------------------------------------------------------------------------
# Step 1: scanning


@dataclass
class _Token:
    op: bool
    text: str
    """An operator, or a word after quote removal."""
    subs: list[str] = field(default_factory=list)
    """The command lines of the word's `$( )`, backtick and `<( )` substitutions."""
    body: str | None = None
    """A heredoc operator's body."""


class _Unbalanced(Exception):
    """An unclosed quote or substitution."""


class _Scanner:
    """Words and operators of a command line (see the module docstring). With `literal`,
    quotes, backticks and `$(` are ordinary characters: the fallback for lines that do
    not scan."""

    def __init__(self, text: str, literal: bool = False) -> None:
        self.text = text
        self.literal = literal
        self.tokens: list[_Token] = []
        self.word: list[str] | None = None
        self.subs: list[str] = []
        self.heredoc_op: _Token | None = None
        """A heredoc operator whose delimiter is the next word."""
        self.pending: list[tuple[_Token, str]] = []
        """Heredoc operators and delimiters whose bodies start after the next newline."""

    def scan(self) -> list[_Token]:
        text, i = self.text, 0
        while i < len(text):
            c = text[i]
            if c == "\\":
                if text.startswith("\n", i + 1):  # line continuation
                    i += 2
                    continue
                self.add(text[i + 1 : i + 2])
                i += 2
            elif c in " \t\r":
                self.end_word()
                i += 1
            elif c == "\n":
                self.end_word()
                self.tokens.append(_Token(True, "\n"))
                i = self.read_heredocs(i + 1)
            elif c == "#" and self.word is None:
                end = text.find("\n", i)
                i = len(text) if end < 0 else end
            elif self.literal:
                i = self.scan_plain(i)
            elif c == "'":
                end = text.find("'", i + 1)
                if end < 0:
                    raise _Unbalanced
                self.add(text[i + 1 : end])
                i = end + 1
            elif c == "$" and text.startswith("'", i + 1):
                end = _closing_quote(text, i + 2, "'")
                self.add(text[i + 2 : end].replace("\\'", "'"))
                i = end + 1
            elif c == '"':
                i = self.scan_double_quoted(i + 1)
            elif c == "`" or (c == "$" and text.startswith("(", i + 1)):
                i = self.scan_substitution(i)
            elif c in "<>" and text.startswith("(", i + 1) and self.word is None:
                i = self.scan_substitution(i)  # process substitution <( ) / >( )
            else:
                i = self.scan_plain(i)
        self.end_word()
        for op, _ in self.pending:  # `cat > f <<EOF` with no body at all
            op.body = ""
        return self.tokens

    def scan_plain(self, i: int) -> int:
        """An operator or an ordinary character at `i`; the index after it."""
        if self.text[i] not in _OPERATOR_CHARS:
            self.add(self.text[i])
            return i + 1
        if self.text[i] in "<>" and self.word is not None and "".join(self.word).isdigit():
            self.word = None  # an fd number (`2>`): which stream is written does not matter
        self.end_word()
        op = next(o for o in _OPERATORS if self.text.startswith(o, i))
        token = _Token(True, op)
        self.tokens.append(token)
        if op in _HEREDOC_OPS:
            self.heredoc_op = token
        return i + len(op)

    def scan_double_quoted(self, i: int) -> int:
        text = self.text
        self.add("")  # "" is a word even when empty
        while i < len(text):
            c = text[i]
            if c == '"':
                return i + 1
            if c == "\\" and i + 1 < len(text):
                nxt = text[i + 1]
                self.add("" if nxt == "\n" else nxt if nxt in '"\\$`' else c + nxt)
                i += 2
            elif c == "`" or (c == "$" and text.startswith("(", i + 1)):
                i = self.scan_substitution(i)
            else:
                self.add(c)
                i += 1
        raise _Unbalanced

    def scan_substitution(self, i: int) -> int:
        """`$( )`, `$(( ))`, backticks, `<( )` at `i`: kept verbatim in the word, the inner
        command line recorded (arithmetic has none)."""
        text = self.text
        if text[i] == "`":
            end = _closing_quote(text, i + 1, "`")
            inner = text[i + 1 : end].replace("\\`", "`")
        else:
            inner, end = _balanced(text, i + 1)
            end -= 1
        if not text.startswith("$((", i):
            self.subs.append(inner)
        self.add(text[i : end + 1])
        return end + 1

    def add(self, chars: str) -> None:
        if self.word is None:
            self.word = []
        self.word.append(chars)

    def end_word(self) -> None:
        if self.word is None:
            return
        token = _Token(False, "".join(self.word), self.subs)
        self.tokens.append(token)
        if self.heredoc_op is not None:
            self.pending.append((self.heredoc_op, token.text))
            self.heredoc_op = None
        self.word, self.subs = None, []

    def read_heredocs(self, i: int) -> int:
        """Reads the bodies of the heredocs opened on the line that just ended."""
        text = self.text
        for op, delimiter in self.pending:
            lines: list[str] = []
            while i < len(text):
                end = text.find("\n", i)
                end = len(text) if end < 0 else end
                line, i = text[i:end], end + 1
                if (line.lstrip("\t") if op.text == "<<-" else line) == delimiter:
                    break
                lines.append(line)
            op.body = "\n".join(lines)
        self.pending = []
        return min(i, len(text))


def _closing_quote(text: str, i: int, quote: str) -> int:
    """The index of the first unescaped `quote` at or after `i`."""
    while i < len(text):
        if text[i] == "\\":
            i += 2
        elif text[i] == quote:
            return i
        else:
            i += 1
    raise _Unbalanced


def _balanced(text: str, i: int) -> tuple[str, int]:
    """For `(` at `i`: the text up to its matching `)` and the index after it; quotes and
    escapes inside are skipped over."""
    depth, j = 0, i
    while j < len(text):
        c = text[j]
        if c == "\\":
            j += 2
            continue
        if c in "'\"`":
            j = _closing_quote(text, j + 1, c) if c != "'" else text.find("'", j + 1)
            if j < 0:
                raise _Unbalanced
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return text[i + 1 : j], j + 1
        j += 1
    raise _Unbalanced


def _tokens(text: str) -> list[_Token]:
    try:
        return _Scanner(text).scan()
    except _Unbalanced:
        # Bash would refuse the line; tag what it was meant to do from a plain word split.
        return _Scanner(text, literal=True).scan()


# ---------------------------------------------------------------------------------------
# Step 2: simple commands


@dataclass
class _Simple:
    argv: list[str] = field(default_factory=list)
    redirects: list[tuple[str, str, str | None]] = field(default_factory=list)
    """(operator, target word, heredoc body)."""
    subs: list[str] = field(default_factory=list)
    piped: bool = False
    """Its stdin comes from a pipe."""


def _parse(tokens: list[_Token]) -> list[_Simple]:
    commands: list[_Simple] = []
    current = _Simple()
    case_pattern = False  # inside `case ... in`, between `;;` and the pattern's `)`
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if case_pattern:
            # the pattern ends at its `)`; `esac` ends the case
            case_pattern = token.text not in (")", "esac")
            continue
        if token.op and token.text in _REDIRECTS:
            target = tokens[i] if i < len(tokens) and not tokens[i].op else None
            i += 1 if target is not None else 0
            current.redirects.append((token.text, target.text if target else "", token.body))
            current.subs += target.subs if target else []
            continue
        if token.op:
            if token.text == "(" and len(current.argv) == 1 and _next_is(tokens, i, ")"):
                current, i = _Simple(), i + 1  # `name() {`: a function definition
                continue
            if current.argv or current.redirects:
                commands.append(current)
            current = _Simple(piped=token.text in ("|", "|&"))
            case_pattern = token.text in (";;", ";&", ";;&")
            continue
        word = token.text
        if not current.argv:
            if word in _RESERVED:
                continue
            if word in ("for", "select", "case", "function"):
                # skip the loop variable and word list / the case subject / the name
                while i < len(tokens) and not tokens[i].op and tokens[i].text not in ("in", "{"):
                    i += 1
                if word == "case":
                    case_pattern, i = True, i + 1
                elif word in ("for", "select"):
                    while i < len(tokens) and not tokens[i].op:
                        i += 1
                continue
            if word == "[[":  # its `&&`, `<`, `>` are operators of the test, not the shell
                while i < len(tokens) and tokens[i].text != "]]":
                    i += 1
                current.argv, i = ["[["], i + 1
                continue
        current.argv.append(word)
        current.subs += token.subs
    if current.argv or current.redirects:
        commands.append(current)
    return commands


def _next_is(tokens: list[_Token], i: int, op: str) -> bool:
    return i < len(tokens) and tokens[i].op and tokens[i].text == op


# ---------------------------------------------------------------------------------------
# Step 3: facts


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


class _Stdin(NamedTuple):
    """What a simple command reads on stdin: a heredoc or here-string (`code`), or data
    from a pipe or a file (`fed`)."""

    code: str | None = None
    fed: bool = False


def _stdin_of(simple: _Simple) -> _Stdin:
    stdin = _Stdin(fed=simple.piped)
    for op, target, body in simple.redirects:
        if op in _HEREDOC_OPS:
            stdin = _Stdin(body or "", True)
        elif op == "<<<":
            stdin = _Stdin(target, True)
        elif op == "<":
            stdin = _Stdin(stdin.code, True)
    return stdin


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


_PYTHON_VALUED = frozenset({"-W", "-X", "-Q"})
_PYTHON_CHECK_MODULES = frozenset({"unittest", "doctest", "py_compile", "compileall"})
_PYTHON_CLI_MODULES = _names(
    "pip pytest mypy flake8 pylint pyflakes pycodestyle ruff black isort tox nox pyright"
)
"""`python -m X ...` behaves as the program X."""


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


_FORMATTERS: dict[str, tuple[frozenset[str], frozenset[str], bool]] = {
    "black": (frozenset({"--check", "--diff"}), frozenset(), True),
    "isort": (frozenset({"--check", "--check-only", "-c", "--diff"}), frozenset(), True),
    "prettier": (
        frozenset({"--check", "-c", "--list-different", "-l"}),
        frozenset({"--write", "-w"}),
        False,
    ),
    "gofmt": (frozenset({"-l", "-d"}), frozenset({"-w"}), False),
    "rustfmt": (frozenset({"--check"}), frozenset(), True),
}
"""Formatters: (flags that make them only check, flags that make them rewrite, whether
they rewrite files by default)."""


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
