"""The program tables of the behaviour tagger: what each known program, subcommand or
flag does (`Fact` and its kinds), the prefixes that run another command, and the phrases
that declare a task complete. Judgement calls where Table 4 is silent are documented at
the tables."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Fact:
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


READ = Fact(read=True)
OTHER = Fact()
"""Changes something none of the behaviours names, or an unknown program."""
RUN = Fact(runs=True)
TEST = Fact(runs=True, test=True)
EDIT = Fact(edits=True)
FILE_OP = Fact(file_op=True)
INSTALL = Fact(install=True)
DECLARE = Fact(declares=True)

READ_PROGRAMS = _names("""
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

NEUTRAL = _names("""
    cd pushd popd export set unset shopt alias unalias true false : sleep wait read umask
    hash trap exit return break continue clear reset shift local declare typeset
    """)
"""Builtins that change nothing on disk; they count as reads (`cd /app && ls` only reads)."""

FILE_OPS = _names("""
    cp mv rm rmdir unlink shred rename mkdir touch ln install rsync chmod chown chgrp
    truncate zip gzip gunzip bzip2 bunzip2 xz unxz zstd 7z 7za rar unrar kill pkill killall
    """)
"""File operations (Table 4: "Moves, copies, deletes, or archives files, changes
permissions, or stops processes."). Judgement call: `mkdir`, `touch`, `ln`, `install`,
`rsync` and `truncate` are also file operations rather than edits; `cp`/`mv` into the
workspace are file operations, not edits (Table 4's example `cp out.txt /app/`)."""

TEST_PROGRAMS = _names("""
    pytest py.test tox nox jest mocha vitest ava karma rspec phpunit ctest bats shellcheck
    flake8 pylint mypy pyright pyflakes pycodestyle pydocstyle bandit eslint tslint stylelint
    hadolint yamllint xmllint cppcheck clang-tidy staticcheck golangci-lint golint cmp diff
    """)
"""Tests, checkers, and comparisons against expected output (Table 4: "Runs a test,
checker, or comparison against expected output"; `diff -u out.txt expected.txt`)."""

COMPILERS = _names("gcc g++ cc c++ clang clang++ rustc javac kotlinc zig nasm as")
"""Compiling runs the toolchain over the code (it makes an edit tested) but is a test only
as a syntax check (`-fsyntax-only`)."""

BUILD_TOOLS = _names("make gmake cmake ninja mvn gradle gradlew ant meson bazel")
"""Building runs code; with a test-like target (`make test`, `mvn verify`) it is a test."""

RUNNERS = _names("""
    uvicorn gunicorn hypercorn flask streamlit celery jupyter ipython gdb valgrind java
    dotnet swift groovy scala kotlin elixir erl psql mysql redis-cli php lua luajit
    Rscript julia ts-node tsx
    """)
"""Programs that run code given to them (servers, interpreters and database clients not
handled by their own rule). Judgement call: `source` / `.` are not here: agents source
virtualenv activation scripts, which changes nothing and tests nothing (they are OTHER)."""

SHELLS = _names("bash sh zsh dash ksh")
SCRIPT_INTERPRETERS = _names("node nodejs deno ruby perl")
PYTHON = re.compile(r"(?:python|pypy)(?:\d+(?:\.\d+)*)?")

VERSION_ARGS = frozenset({"--version", "-V", "-v", "-version", "version", "--help", "-h"})
"""`prog --version` alone only inspects (not for test runners: `pytest -v` runs tests)."""

TESTY = re.compile(
    r"(?:^|[_.:-])(?:tests?|check|checks|checker|lint|verify|validate|typecheck|unittest)"
    r"(?:[_.:-]|$)",
    re.IGNORECASE,
)
"""A script, module, make target or npm script that is a test or check: `test_app.py`,
`run_tests.sh`, `check.py`, `make test`, `npm run test:unit` (not `contest.py`)."""

PREFIXES: dict[str, frozenset[str]] = {
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

SUB_PREFIXES: dict[tuple[str, str], frozenset[str]] = {
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

_SAME_VERBS = {"dnf": "yum", "micromamba": "mamba"}
"""Tools whose subcommands are another's (a successor, a rewrite): read as that one's."""

SUBCOMMANDS: dict[str, dict[str, Fact]] = {
    "pip": {
        "install": INSTALL,
        "list": READ,
        "show": READ,
        "freeze": READ,
        "check": READ,
        "help": READ,
    },
    "apt": {"install": INSTALL, "list": READ, "search": READ, "show": READ, "policy": READ},
    "apt-get": {"install": INSTALL},
    "apt-cache": {"search": READ, "show": READ, "policy": READ, "depends": READ},
    "yum": {"install": INSTALL, "list": READ, "info": READ, "search": READ},
    "zypper": {"install": INSTALL, "in": INSTALL, "search": READ},
    "apk": {"add": INSTALL, "info": READ, "search": READ},
    "brew": {"install": INSTALL, "list": READ, "info": READ, "search": READ},
    "snap": {"install": INSTALL, "list": READ},
    "gem": {"install": INSTALL, "list": READ},
    "bundle": {"install": INSTALL, "add": INSTALL},
    "composer": {"install": INSTALL, "require": INSTALL, "show": READ},
    "conda": {"install": INSTALL, "create": INSTALL, "list": READ, "info": READ},
    "mamba": {"install": INSTALL, "create": INSTALL, "list": READ},
    "poetry": {"add": INSTALL, "install": INSTALL, "show": READ, "check": TEST},
    "pipenv": {"install": INSTALL, "graph": READ},
    "pipx": {"install": INSTALL, "list": READ},
    "pdm": {"add": INSTALL, "install": INSTALL, "list": READ},
    "uv": {"add": INSTALL, "sync": INSTALL, "tool": INSTALL},
    "opam": {"install": INSTALL, "list": READ},
    "luarocks": {"install": INSTALL, "list": READ},
    "nix-env": {"-i": INSTALL, "--install": INSTALL, "-q": READ},
    "go": {
        "test": TEST,
        "vet": TEST,
        "run": RUN,
        "build": RUN,
        "generate": RUN,
        "install": INSTALL,
        "get": INSTALL,
        "fmt": EDIT,
        "version": READ,
        "env": READ,
        "list": READ,
        "doc": READ,
    },
    "cargo": {
        "test": TEST,
        "check": TEST,
        "clippy": TEST,
        "build": RUN,
        "run": RUN,
        "bench": RUN,
        "install": INSTALL,
        "add": INSTALL,
        "fmt": EDIT,
        "tree": READ,
        "metadata": READ,
    },
    "dotnet": {"test": TEST, "run": RUN, "build": RUN, "add": INSTALL, "restore": INSTALL},
    "git": {
        "status": READ,
        "log": READ,
        "diff": READ,
        "show": READ,
        "blame": READ,
        "ls-files": READ,
        "ls-tree": READ,
        "rev-parse": READ,
        "rev-list": READ,
        "describe": READ,
        "shortlog": READ,
        "grep": READ,
        "reflog": READ,
        "cat-file": READ,
        "check-ignore": READ,
        "help": READ,
        "version": READ,
        "mv": FILE_OP,
        "rm": FILE_OP,
        "apply": EDIT,
        "am": EDIT,
    },
}
"""Tools judged by their first positional argument; a subcommand not listed is OTHER.
`apt-get update`, `git commit`, `git checkout` change something no behaviour names.
Judgement call: `git apply` / `git am` (like `patch`) change workspace files, so they edit."""
SUBCOMMANDS |= {tool: SUBCOMMANDS[like] for tool, like in _SAME_VERBS.items()}

FLAG_TOOLS: dict[str, dict[str, Fact]] = {
    "pacman": {"-S": INSTALL, "-Sy": INSTALL, "-Syu": INSTALL, "-U": INSTALL, "-Q": READ},
    "dpkg": {"-i": INSTALL, "--install": INSTALL, "-l": READ, "-L": READ, "-s": READ},
}
"""Package managers judged by their first known flag (`dpkg -i`, `dpkg -l`)."""

NODE_MANAGERS = frozenset({"npm", "yarn", "pnpm", "bun"})
NODE_INSTALL = frozenset({"install", "i", "ci", "add", "in", "isntall"})
NODE_READ = frozenset({"ls", "list", "view", "info", "outdated", "why", "config", "root"})

PYTHON_VALUED = frozenset({"-W", "-X", "-Q"})
PYTHON_CHECK_MODULES = frozenset({"unittest", "doctest", "py_compile", "compileall"})
PYTHON_CLI_MODULES = _names(
    "pip pytest mypy flake8 pylint pyflakes pycodestyle ruff black isort tox nox pyright"
)
"""`python -m X ...` behaves as the program X."""

FORMATTERS: dict[str, tuple[frozenset[str], frozenset[str], bool]] = {
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


# ---------------------------------------------------------------------------------------
# Declaring completion


COMPLETION = re.compile(
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

NEGATION = re.compile(r"\b(?:not|never|cannot|unable|incomplete)\b|n't\b", re.IGNORECASE)

BARE_DONE = frozenset({"done", "all done", "complete", "completed", "finished", "submitted"})
"""What `echo` may print to declare completion when it is the whole action (`echo DONE`);
after other commands (`make && echo done`) it only reports progress."""

SUBMIT_PROGRAMS = frozenset({"submit"})
"""Commands that submit in agent harnesses (SWE-agent's `submit`)."""
