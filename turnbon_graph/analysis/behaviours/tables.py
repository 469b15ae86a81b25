"""The program tables of the behaviour tagger: what each known program, subcommand or
flag does (`_Fact` and its kinds), the prefixes that run another command, and the phrases
that declare a task complete. Judgement calls where Table 4 is silent are documented at
the tables."""

from __future__ import annotations

import re
from dataclasses import dataclass


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

_PYTHON_VALUED = frozenset({"-W", "-X", "-Q"})
_PYTHON_CHECK_MODULES = frozenset({"unittest", "doctest", "py_compile", "compileall"})
_PYTHON_CLI_MODULES = _names(
    "pip pytest mypy flake8 pylint pyflakes pycodestyle ruff black isort tox nox pyright"
)
"""`python -m X ...` behaves as the program X."""

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


# ---------------------------------------------------------------------------------------
# Declaring completion


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

_NEGATION = re.compile(r"\b(?:not|never|cannot|unable|incomplete)\b|n't\b", re.IGNORECASE)

_BARE_DONE = frozenset({"done", "all done", "complete", "completed", "finished", "submitted"})
"""What `echo` may print to declare completion when it is the whole action (`echo DONE`);
after other commands (`make && echo done`) it only reports progress."""

_SUBMIT_PROGRAMS = frozenset({"submit"})
"""Commands that submit in agent harnesses (SWE-agent's `submit`)."""
