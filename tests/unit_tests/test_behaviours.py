"""Behaviour tags of shell actions (the paper's Table 4 / Figure 4) on real-looking commands.

Every example command of Table 4 is in TABLE with the tag the paper gives it; the rest are
commands an agent runs in a terminal task. Each row names its exact tag set.
"""

from __future__ import annotations

import pytest

from turnbon_graph.analysis.behaviours import TAGS, Executed, declares_complete, tag_command

EDIT = "edits_file"
LAST = "tests_last_edit"
TEST = "runs_test"
FILES = "file_ops"
INSTALL = "installs_package"
READ = "read_only"
LOOP = "loops"
DONE = "declares_complete"


def row(id: str, command: str, *tags: str) -> tuple[str, str, set[str]]:
    """One table row: its test id, the command line, its exact tag set."""
    return id, command, set(tags)


SOLVE_HEREDOC = """cat > solve.py <<'EOF'
import sys
print(sum(int(x) for x in sys.stdin.read().split()))
EOF"""

TABLE = [
    # --- Table 4's example commands, with the behaviour the paper gives each
    row("table4-edit-sed", "sed -i 's/x/y/' app.py", EDIT),
    # as printed in the paper, with typographic quotes
    row("table4-edit-sed-as-printed", "sed -i \u2019s/x/y/\u2019 app.py", EDIT),
    row("table4-edit-heredoc-opening", "cat > solve.py <<EOF", EDIT),
    row("table4-test-pytest", "pytest tests/", TEST),
    row("table4-test-diff", "diff -u out.txt expected.txt", TEST),
    row("table4-file-ops-cp", "cp out.txt /app/", FILES),
    row("table4-file-ops-chmod", "chmod +x run.sh", FILES),
    row("table4-install-pip", "pip install numpy", INSTALL),
    row("table4-install-apt-get", "apt-get install -y jq", INSTALL),
    row("table4-read-ls", "ls /app", READ),
    row("table4-read-cat", "cat README.md", READ),
    # --- edits: redirects, heredocs, tee, in-place editors, Python open()
    row("edit-heredoc-full", SOLVE_HEREDOC, EDIT),
    row("edit-heredoc-dash", "cat <<-EOF > config.ini\n\t[server]\n\tport = 8080\n\tEOF", EDIT),
    row("edit-append-bashrc", "echo 'export PATH=$PATH:/opt/bin' >> ~/.bashrc", EDIT),
    row("edit-group-redirect", "{ echo 'a,b'; echo '1,2'; } > data.csv", EDIT),
    row("edit-sudo-tee", "cat <<'EOF' | sudo tee /etc/nginx/conf.d/app.conf\nserver {}\nEOF", EDIT),
    row("edit-tee-append", "echo 'DEBUG=false' | tee -a .env", EDIT),
    row("edit-sed-backup-e", "sed -i.bak -e 's/DEBUG = True/DEBUG = False/' settings.py", EDIT),
    row("edit-perl-pie", "perl -pi -e 's/foo/bar/g' config.ini", EDIT),
    row("edit-awk-print-to-file", "awk -F, '{print $1 > \"ids.txt\"}' users.csv", EDIT),
    row(
        "edit-python-heredoc-open",
        "python3 - <<'EOF'\nimport json\nwith open('config.json', 'w') as f:\n"
        "    json.dump({'port': 8080}, f)\nEOF",
        EDIT,
    ),
    row(
        "edit-python-c-write-text",
        "python3 -c \"from pathlib import Path; Path('out.txt').write_text('42')\"",
        EDIT,
    ),
    row("edit-git-apply", "git apply fix.patch", EDIT),
    row("edit-patch", "patch -p1 < fix.diff", EDIT),
    row("edit-dd-image", "dd if=/dev/zero of=disk.img bs=1M count=10", EDIT),
    row("edit-formatter-black", "black src/", EDIT),
    row("edit-log-of-background-server", "nohup python server.py > server.log 2>&1 &", EDIT),
    row("edit-bash-c", "bash -c \"echo 'hello' > greeting.txt\"", EDIT),
    row("edit-echo-done-to-file", 'echo "done" > status.txt', EDIT),
    # --- writes into /tmp or /dev do not count (Table 4); they are not read-only either
    row("tmp-redirect", "echo 'scratch' > /tmp/notes.txt"),
    row("tmp-sed", "sed -i 's/a/b/' /tmp/x.txt"),
    row(
        "tmp-python-open",
        "python3 - <<'EOF'\nwith open('/tmp/probe.txt', 'w') as f:\n    f.write('x')\nEOF",
    ),
    row("tmp-after-cd", "cd /tmp && cat > t.py <<'EOF'\nprint(1)\nEOF\npython t.py"),
    row("dev-null-only-reads", "cat data.csv > /dev/null", READ),
    # --- tests, checks and comparisons against expected output
    row("test-python-m-pytest", "timeout 30 python -m pytest tests/test_api.py -x -q", TEST),
    row("test-unittest-env", "env PYTHONPATH=src python -m unittest discover -s tests", TEST),
    row("test-cd-then-pytest", "cd /app && python -m pytest -q", TEST),
    row("test-python-c-assert", 'python -c "import solve; assert solve.add(2, 3) == 5"', TEST),
    row(
        "test-python-heredoc-assert",
        "python3 <<EOF\nfrom solve import f\nassert f(1) == 2\nprint('ok')\nEOF",
        TEST,
    ),
    row("test-test-script", "python tests/test_parser.py", TEST),
    row("test-run-tests-sh", "./run_tests.sh", TEST),
    row("test-bash-tests-dir", "bash tests/run_all.sh", TEST),
    row("test-process-substitution-diff", "diff <(python solve.py < input.txt) expected.txt", TEST),
    row("test-pipe-into-diff", "python solve.py < input.txt | diff - expected_output.txt", TEST),
    row("test-cmp", "cmp out.bin expected.bin && echo SAME", TEST),
    row("test-sha256-check", "sha256sum -c SHA256SUMS", TEST),
    row("test-npm-test", "npm test", TEST),
    row("test-npm-run-test-unit", "npm run test:unit", TEST),
    row("test-npx-jest", "npx jest --runInBand", TEST),
    row("test-cargo", "cargo test --release", TEST),
    row("test-go", "go test ./...", TEST),
    row("test-make-test", "make test", TEST),
    row("test-ctest", "cd build && ctest --output-on-failure", TEST),
    row("test-gcc-syntax-only", "gcc -Wall -fsyntax-only main.c", TEST),
    row("test-linters", "ruff check . && mypy --strict src/", TEST),
    row("test-bash-n", "bash -n deploy.sh", TEST),
    row("test-tsc-noemit", "npx tsc --noEmit", TEST),
    row("test-py-compile-loop", 'for f in *.py; do python -m py_compile "$f"; done', TEST),
    row("test-uv-run-pytest", "uv run pytest -q", TEST),
    row("test-source-venv-then-pytest", "source .venv/bin/activate && pytest", TEST),
    row("test-git-diff-no-index", "git diff --no-index expected.txt out.txt", TEST),
    row("test-django", "python manage.py test", TEST),
    # --- running code that is not a test: no tag, and not read-only
    row("run-solution", "python solve.py"),
    row("run-python-c-print", "python3 -c 'import sys; print(sys.version)'"),
    row("run-c-build-and-binary", "gcc -O2 -o main main.c && ./main"),
    row("run-make", "make -j4"),
    row("run-node-server", "node server.js &"),
    row("run-npm-build", "npm run build"),
    row("run-java", "javac Main.java && java Main < input.txt"),
    row("run-sqlite-schema", "sqlite3 app.db < schema.sql"),
    row("run-sqlite-update", 'sqlite3 app.db "UPDATE users SET active = 1 WHERE id = 3;"'),
    row("run-psql-as-postgres", "sudo -u postgres psql -c 'CREATE DATABASE app;'"),
    row("run-pipe-into-bash", "cat setup.sh | bash"),
    row("unknown-curl", "curl -s http://localhost:8080/health"),
    row("unknown-git-commit", "git add -A && git commit -m 'Fix parser'"),
    row("unknown-git-checkout", "git checkout -- src/app.py"),
    row("unknown-apt-update", "apt-get update"),
    # --- file operations
    row("files-find-exec-rm", "find . -name '*.pyc' -exec rm -f {} \\;", FILES),
    row("files-find-delete", "find /tmp -name '*.log' -delete", FILES),
    row("files-xargs-rm", "xargs -a stale.txt rm -f", FILES),
    row("files-sh-c", 'sh -c "rm -rf build && mkdir build"', FILES),
    row("files-bash-heredoc-body", "bash <<'EOF'\nrm -rf dist\nEOF", FILES),
    row("files-tar-create", "tar -czf backup.tar.gz src/", FILES),
    row("files-unzip", "unzip -o archive.zip -d data/", FILES),
    row("files-mv-chmod", "mv build/app /usr/local/bin/ && chmod 755 /usr/local/bin/app", FILES),
    row("files-mkdir-touch", "mkdir -p src/utils && touch src/utils/__init__.py", FILES),
    row("files-pkill", "pkill -f 'python server.py'", FILES),
    row("files-git-mv", "git mv old_name.py new_name.py", FILES),
    row("files-in-substitution", 'ls; echo "$(rm -rf cache)"', FILES),
    # --- installs
    row(
        "install-sudo-apt",
        "sudo apt-get update && sudo apt-get install -y build-essential",
        INSTALL,
    ),
    row("install-pip-editable", "python -m pip install -e .", INSTALL),
    row("install-uv-pip", "uv pip install requests", INSTALL),
    row("install-npm-subshell", "(cd frontend && npm ci)", INSTALL),
    row("install-yarn-add", "yarn add lodash", INSTALL),
    row("install-cargo-add", "cargo add serde --features derive", INSTALL),
    row("install-gem-bundle", "gem install bundler && bundle install", INSTALL),
    row("install-conda", "conda install -y numpy", INSTALL),
    row("install-rm-then-npm", "rm -rf node_modules && npm install", FILES, INSTALL),
    row("install-then-test", "pip install -r requirements.txt && pytest -q", INSTALL, TEST),
    row(
        "install-venv-activate",
        "python -m venv .venv && . .venv/bin/activate && pip install flask",
        INSTALL,
    ),
    # --- only reads or inspects
    row("read-pipeline-xargs-grep", "find . -name '*.py' | xargs grep -n 'TODO'", READ),
    row("read-grep-alternation", "grep -E 'error|warning' app.log | wc -l", READ),
    row("read-git-status", "git status", READ),
    row("read-git-log-head", "git log --oneline | head -5", READ),
    row("read-git-diff", "git diff HEAD~1 -- src/", READ),
    row("read-git-branch", "git branch -a", READ),
    row("read-bash-c", "bash -c 'cd /app && ls -la'", READ),
    row("read-if-else", "if [ -f config.yaml ]; then cat config.yaml; else echo missing; fi", READ),
    row("read-while-read", 'while read line; do echo "$line"; done < input.txt', READ),
    row("read-sqlite-tables", "sqlite3 app.db '.tables'", READ),
    row("read-sqlite-select", 'sqlite3 -header app.db "SELECT count(*) FROM users;"', READ),
    row("read-tar-list", "tar -tzf dist.tar.gz | head", READ),
    row("read-unzip-list", "unzip -l archive.zip", READ),
    row("read-awk-sort-uniq", "awk -F, '{print $2}' data.csv | sort | uniq -c", READ),
    row("read-sed-n", "sed -n '1,50p' src/main.py", READ),
    row(
        "read-stderr-to-null",
        "ls -la /app/ && cat /app/task.yaml 2>/dev/null || echo 'no file'",
        READ,
    ),
    row("read-versions", "which python3 && python3 --version", READ),
    row("read-pip-list", "pip list | grep -i torch", READ),
    row("read-jq", "jq '.scripts' package.json", READ),
    row("read-hexdump", "head -c 64 firmware.bin | xxd", READ),
    row("read-ps", "ps aux | grep -v grep | grep server", READ),
    row("read-cd-only", "cd /app", READ),
    row("read-substitution", 'echo "Python: $(python --version)"', READ),
    row("read-line-continuation", "ls \\\n  -la /app", READ),
    row("read-comment", "# look around first\nls", READ),
    row("read-cat-heredoc-to-stdout", "cat <<EOF\nhello\nEOF", READ),
    row("read-double-bracket", "[[ -f a.txt && -f b.txt ]] && echo both", READ),
    # --- declaring the task complete
    row("done-echo-task-complete", "echo 'Task complete'", DONE),
    row("done-echo-bare", "echo DONE", DONE),
    row("done-mini-swe-agent-marker", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", DONE),
    row("done-after-tests", 'pytest -q && echo "Task complete"', TEST, DONE),
    row("done-submit", "submit", DONE),
    row("not-done-progress-echo", "make && echo done"),
    row("not-done-negated", 'echo "Task is not complete yet"', READ),
    row("not-done-captured", "status=$(echo done)", READ),
    # --- an edit followed by a run in the same line tests that edit
    row("edit-then-run-same-line", SOLVE_HEREDOC + "\npython solve.py < input.txt", EDIT, LAST),
    row(
        "edit-then-make-same-line",
        "cat > Makefile <<'EOF'\nall:\n\tcc -o app app.c\nEOF\nmake",
        EDIT,
        LAST,
    ),
    row("empty-command", ""),
]


@pytest.mark.parametrize(
    ("command", "expected"), [pytest.param(command, tags, id=id) for id, command, tags in TABLE]
)
def test_tags_of_command(command: str, expected: set[str]) -> None:
    assert tag_command(command) == expected


def test_table_is_large_and_uses_only_known_tags() -> None:
    assert len(TABLE) >= 80
    assert len({id for id, _, _ in TABLE}) == len(TABLE)
    for _, _, tags in TABLE:
        assert tags <= set(TAGS)


def test_tags_keep_the_papers_order() -> None:
    assert TAGS == (EDIT, LAST, TEST, FILES, INSTALL, READ, LOOP, DONE)


# --- tests its last edit: "Runs code while the latest edit is untested, i.e., no turn since
# the edit has run or tested anything." (Table 4)

EDIT_SOLVE = (SOLVE_HEREDOC, 0)


@pytest.mark.parametrize(
    ("command", "history", "expected"),
    [
        # Table 4's example: `python solve.py` right after editing solve.py
        pytest.param("python solve.py", [EDIT_SOLVE], True, id="table4-run-right-after-edit"),
        pytest.param("pytest -q", [("sed -i 's/a/b/' app.py", 0)], True, id="test-after-sed"),
        pytest.param(
            "python other.py", [EDIT_SOLVE], True, id="run-of-another-file-still-runs-code"
        ),
        pytest.param(
            "python solve.py",
            [EDIT_SOLVE, ("cat solve.py", 0), ("ls -la", 0)],
            True,
            id="reads-since-edit-leave-it-untested",
        ),
        pytest.param(
            "diff out.txt expected.txt",
            [EDIT_SOLVE],
            True,
            id="check-after-edit",
        ),
        pytest.param(
            "python solve.py",
            [EDIT_SOLVE, ("python solve.py < input.txt", 1)],
            False,
            id="edit-already-run-even-if-it-failed",
        ),
        pytest.param(
            "pytest",
            [EDIT_SOLVE, ("pytest -q", 0), ("cat out.txt", 0)],
            False,
            id="edit-already-tested",
        ),
        pytest.param("python solve.py", [("ls", 0), ("cat README.md", 0)], False, id="no-edit"),
        pytest.param(
            "python /tmp/probe.py",
            [("cat > /tmp/probe.py <<'EOF'\nprint(1)\nEOF", 0)],
            False,
            id="scratch-edit-is-no-edit",
        ),
        pytest.param("cat solve.py", [EDIT_SOLVE], False, id="read-after-edit-runs-nothing"),
        pytest.param(
            "python solve.py && sed -i 's/1/2/' solve.py",
            [],
            False,
            id="edit-after-the-run-in-same-line",
        ),
        pytest.param(
            "python solve.py",
            [Executed(SOLVE_HEREDOC, 0)],
            True,
            id="history-of-executed",
        ),
    ],
)
def test_tests_last_edit(
    command: str, history: list[tuple[str, int | None]], expected: bool
) -> None:
    assert ("tests_last_edit" in tag_command(command, history)) is expected


# --- loops on a command: the same command as the previous executed one, which failed


@pytest.mark.parametrize(
    ("command", "history", "expected"),
    [
        pytest.param("pytest -q", [("pytest -q", 1)], True, id="rerun-of-failed"),
        pytest.param("pytest -q", [("pytest -q", 0)], False, id="rerun-of-successful"),
        pytest.param("pytest -q -x", [("pytest -q", 1)], False, id="changed-command"),
        pytest.param(
            "gcc  -o main   main.c", [("gcc -o main main.c", 1)], True, id="whitespace-only"
        ),
        pytest.param("make", [("make", None)], False, id="unknown-exit-code"),
        pytest.param(
            "make", [("make", 2), ("cat Makefile", 0)], False, id="failed-but-not-previous"
        ),
        pytest.param("make", [], False, id="no-history"),
        pytest.param(
            "ls /nonexistent", [Executed("ls /nonexistent", 2)], True, id="history-of-executed"
        ),
    ],
)
def test_loops(command: str, history: list[tuple[str, int | None]], expected: bool) -> None:
    assert ("loops" in tag_command(command, history)) is expected


def test_loop_keeps_the_other_tags() -> None:
    assert tag_command("ls /nonexistent", [("ls /nonexistent", 2)]) == {LOOP, READ}


# --- lines that do not parse: never raise, tag a best-effort word split (quotes literal)


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        pytest.param("echo 'unbalanced", {READ}, id="unclosed-single-quote"),
        pytest.param('sed -i "s/a/b/ app.py', {EDIT}, id="unclosed-double-quote"),
        pytest.param("python -c \"print('hi')", set(), id="unclosed-python-c"),
        pytest.param("echo $(ls", {READ}, id="unclosed-substitution"),
        pytest.param("cat > notes.md <<EOF\nno terminator", {EDIT}, id="unterminated-heredoc"),
    ],
)
def test_unparseable_command(command: str, expected: set[str]) -> None:
    assert tag_command(command) == expected


# --- a text-only final answer


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("Done.", True, id="done"),
        pytest.param("Done: the task's solution ran.", True, id="done-colon"),
        pytest.param("The task is complete. All tests pass.", True, id="task-is-complete"),
        pytest.param("I have completed the task and written /app/out.txt.", True, id="completed"),
        pytest.param("I looked around and believe nothing more is needed.", True, id="nothing"),
        pytest.param("The task is not complete yet: the build fails.", False, id="negated"),
        pytest.param("I couldn't finish; the task isn't done.", False, id="negated-nt"),
        pytest.param("Complete rewrite of the parser is needed.", False, id="complete-as-adj"),
        pytest.param("Here is a summary of the changes I made.", False, id="summary-only"),
        pytest.param("", False, id="empty"),
    ],
)
def test_declares_complete_text(text: str, expected: bool) -> None:
    assert declares_complete(text) is expected
