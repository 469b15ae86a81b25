"""Copies of an episode's folders (a fork, `turnbon run --keep-workdir`) keep what the
files are: sparse files stay sparse, hard links stay links, symlinks stay symlinks and are
never read through (not even one swapped in mid-copy), modes and times are kept; named
pipes, sockets and devices are left out with a note. Real sandboxes, no mocks."""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import shutil
import stat
import tempfile
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.integration_tests.test_terminal_environment import ROOT, spec, write_task
from turnbon_graph.bench.copying import copy_tree
from turnbon_graph.cli import main
from turnbon_terminal import TerminalEnvironment, TerminalEpisode

GiB = 1 << 30
PASSES = "def test_x() -> None:\n    pass\n"


@pytest.fixture
async def episode(tmp_path: Path) -> AsyncIterator[TerminalEpisode]:
    write_task(tmp_path / "tasks", "files", PASSES)
    env = TerminalEnvironment(tmp_path / "tasks")
    started = await env.start(spec(env, "files"), 0)
    yield started
    await started.close()


def disk_bytes(folders: tuple[Path, ...]) -> int:
    """What the files below `folders` take on disk (not their apparent size)."""
    return sum(
        os.lstat(os.path.join(folder, name)).st_blocks * 512
        for top in folders
        for folder, dirs, files in os.walk(top)
        for name in [*dirs, *files]
    )


async def test_a_sparse_file_stays_sparse_in_a_fork(episode: TerminalEpisode) -> None:
    made = await episode.run(
        "truncate -s 1G big && printf start | dd of=big conv=notrunc status=none"
        f" && printf middle | dd of=big bs=1 seek={GiB // 2} conv=notrunc status=none"
        f" && printf end | dd of=big bs=1 seek={GiB - 3} conv=notrunc status=none"
    )
    assert made.ok, made.output
    fork = await episode.fork()
    try:
        assert disk_bytes(fork.sandbox.writable_dirs) < 10_000_000
        read = f"stat -c %s big; head -c 5 big; echo; dd if=big bs=1 skip={GiB // 2} count=6"
        read += " status=none; echo; tail -c 3 big"
        seen = await fork.run(read)
        assert seen.output.split() == [str(GiB), "start", "middle", "end"]
        assert seen.output == (await episode.run(read)).output
    finally:
        await fork.close()


async def test_hard_links_stay_one_file_in_a_fork(episode: TerminalEpisode) -> None:
    assert (await episode.run("echo shared > a && ln a b && mkdir d && ln a d/c")).ok
    fork = await episode.fork()
    try:
        inodes = {(fork.workdir / name).stat().st_ino for name in ("a", "b", "d/c")}
        assert len(inodes) == 1 and (fork.workdir / "a").stat().st_nlink == 3
        assert (await fork.run("echo more >> b && cat d/c")).output == "shared\nmore\n"
        assert (await episode.run("cat a")).output == "shared\n"  # the fork's own inode
    finally:
        await fork.close()


async def test_modes_times_and_symlinks_are_kept(episode: TerminalEpisode) -> None:
    made = await episode.run(
        "echo run > tool && chmod 751 tool && mkdir -p dir/sub && echo x > dir/sub/old"
        " && touch -d 2001-02-03T04:05:06 dir/sub/old && chmod 750 dir/sub"
        " && touch -d 2002-03-04 dir/sub && ln -s dir/sub/old rel && ln -s /nowhere dangling"
    )
    assert made.ok, made.output
    fork = await episode.fork()
    try:
        for name in ("tool", "dir/sub", "dir/sub/old", "rel", "dangling"):
            old, new = (episode.workdir / name).lstat(), (fork.workdir / name).lstat()
            assert stat.S_IMODE(new.st_mode) == stat.S_IMODE(old.st_mode), name
            assert stat.S_IFMT(new.st_mode) == stat.S_IFMT(old.st_mode), name
            assert new.st_mtime_ns == old.st_mtime_ns, name
        assert os.readlink(fork.workdir / "rel") == "dir/sub/old"
        assert os.readlink(fork.workdir / "dangling") == "/nowhere"
    finally:
        await fork.close()


async def test_pipes_and_sockets_are_left_out_with_a_note(
    episode: TerminalEpisode, caplog: pytest.LogCaptureFixture
) -> None:
    made = await episode.run(
        "mkfifo p && mkdir sub && mkfifo sub/q && mkfifo $TMPDIR/t && echo kept > sub/kept"
        " && python3 -c \"import socket; socket.socket(socket.AF_UNIX).bind('sock')\""
    )
    assert made.ok, made.output
    with caplog.at_level(logging.WARNING, logger="turnbon_graph.bench.copying"):
        fork = await episode.fork()
    try:
        notes = [r.getMessage().split(": ", 1)[1] for r in caplog.records]
        assert notes == [
            "skipped named pipe work/p",
            "skipped socket work/sock",
            "skipped named pipe work/sub/q",
            "skipped named pipe tmp/t",
        ]
        assert sorted(os.listdir(fork.workdir)) == ["sub"]
        assert os.listdir(fork.workdir / "sub") == ["kept"] and not os.listdir(fork.sandbox.tmpdir)
    finally:
        await fork.close()


RUNS_THE_TOOL = """
import os, subprocess


def test_the_tool_runs() -> None:
    tool = os.path.join(os.environ["TASK_WORKDIR"], "tool")
    assert subprocess.run([tool], capture_output=True, text=True).stdout == "ran\\n"
"""
PLANT_ABSOLUTE = (
    "cp /bin/bash mybash && printf '#!%s/mybash\\necho ran\\n' \"$PWD\" > tool && chmod +x tool"
    ' && ln -s "$PWD/tool" abs-link && echo "$TMPDIR" > tmpdir.txt && pwd'
)
"""A script whose shebang is an absolute path into the work folder, an absolute link to
it, and the TMPDIR's path written down (a virtualenv writes its paths the same way)."""


async def test_a_fork_sees_its_folders_at_the_paths_its_parent_did(tmp_path: Path) -> None:
    """What the agent wrote with absolute paths works in a fork, after its parent closed,
    and the fork's verifier runs it at that path too: every episode and every fork sees
    its work folder at one path (under bwrap). Before, a fork's path was its own host
    folder's, and the shebang pointed into its parent's: `bad interpreter`."""
    write_task(tmp_path / "tasks", "shebang", RUNS_THE_TOOL)
    env = TerminalEnvironment(tmp_path / "tasks")
    parent = await env.start(spec(env, "shebang"), 0)
    try:
        planted = await parent.run(PLANT_ABSOLUTE)
        assert planted.ok, planted.output
        fork = await parent.fork()
    finally:
        await parent.close()
    try:
        assert fork.workdir != parent.workdir  # its own host folder
        seen = await fork.run('./tool && ./abs-link && pwd && test "$(cat tmpdir.txt)" = "$TMPDIR"')
        assert seen.ok, seen.output
        assert seen.output == f"ran\nran\n{planted.output.splitlines()[-1]}\n"
        assert (await fork.verify()).passed
    finally:
        await fork.close()


async def test_a_fork_carries_the_files_not_the_processes_nor_the_sandboxs_tmp(
    episode: TerminalEpisode,
) -> None:
    """What a fork does not carry: a process the episode left running, and the files of
    the sandbox's own /tmp (a tmpfs of its own); the episode keeps both."""
    made = await episode.run(
        "echo kept > /tmp/scratch && echo kept > note.txt && (sleep 302 >/dev/null 2>&1 &)"
    )
    assert made.ok, made.output
    look = (  # `30[2]`: the pattern matches the sleep, not this shell's command line
        "cat note.txt; cat /tmp/scratch 2>/dev/null || echo no-scratch; "
        "pgrep -f 'sleep 30[2]' >/dev/null && echo running || echo not-running"
    )
    fork = await episode.fork()
    try:
        assert (await fork.run(look)).output == "kept\nno-scratch\nnot-running\n"
        assert (await episode.run(look)).output == "kept\nkept\nrunning\n"
    finally:
        await fork.close()


SWAPPER = """
    import os, sys, time

    secret, kind = sys.argv[1], sys.argv[2]
    end = time.monotonic() + 60
    while time.monotonic() < end:
        for level in [".", "a", "a/b", "a/b/c"]:
            name = f"{level}/swap{kind}"
            if kind == "file":  # a file of ours, then a symlink to the secret, in place
                with open(name + ".new", "w") as handle:
                    handle.write("mine\\n")
                os.replace(name + ".new", name)
                os.symlink(secret, name + ".new")
                os.replace(name + ".new", name)
            else:  # a folder of ours and a symlink to the secret's folder trade places
                os.rename(name, name + ".old")
                os.rename(name + ".link", name)
                os.rename(name + ".old", name + ".link")
"""
"""Run by the agent, one for files and one for folders, while the episode is forked:
against a copier that follows a path it once saw as a file or folder, a fork holds the
secret (or the copy fails) within a few forks."""


def holds_no_secret(top: Path, content: bytes, links: set[str]) -> int:
    """Checks that no file below `top` holds `content`, that every symlink is one of
    `links` and that the swapped folders are the owner's; returns how many swapped
    names the copy holds."""
    swaps = 0
    for folder, dirs, files in os.walk(top):  # never into a symlinked folder
        assert not folder.endswith("secret-dir"), folder
        for name in [*dirs, *files]:
            entry = Path(folder, name)
            swaps += name.startswith("swap")
            if entry.is_symlink():
                assert os.readlink(entry) in links, entry
            elif entry.is_file():
                assert content not in entry.read_bytes(), entry
        if Path(folder).name.startswith("swapdir"):  # a folder of the owner's
            assert set(files) <= {"f"} and not dirs, folder
    return swaps


@pytest.fixture
def secret(tmp_path: Path) -> tuple[Path, bytes]:
    """A host file only root (or, not as root, the runner) can read, and its content."""
    content = f"TOP-SECRET-{secrets.token_hex(8)}".encode()
    folder = tmp_path / "secret-dir"
    folder.mkdir(mode=0o700)
    (folder / "inside").write_bytes(content)
    path = tmp_path / "secret"
    path.write_bytes(content)
    path.chmod(0o600)
    return path, content


async def test_symlinks_to_a_root_only_file_are_never_read_through(
    episode: TerminalEpisode, secret: tuple[Path, bytes]
) -> None:
    path, content = secret
    secret_dir = path.parent / "secret-dir"
    plant = " && ".join(
        f"ln -s {path} {level}/link && ln -s {secret_dir} {level}/dirlink"
        f" && ln -s link {level}/chained && touch {level}/swapfile && mkdir {level}/swapdir"
        f" && echo mine > {level}/swapdir/f && ln -s {secret_dir} {level}/swapdir.link"
        for level in (".", "a", "a/b", "a/b/c")
    )
    plant += f" && ln -s {path} $TMPDIR/link"
    (episode.workdir / "swapper.py").write_text(textwrap.dedent(SWAPPER))
    episode.sandbox.give(episode.workdir / "swapper.py")
    assert (await episode.run(f"mkdir -p a/b/c && {plant}")).ok
    # The owner keeps swapping files and folders for symlinks to the secret meanwhile.
    swappers = f"python3 swapper.py {path} file & python3 swapper.py {path} dir &"
    swapping = await episode.run(swappers)
    assert swapping.background, swapping.output
    forks = [await episode.fork() for _ in range(5)]
    try:
        await episode.sandbox.kill_all()
        links = {str(path), str(secret_dir), "link"}
        swaps = 0
        for fork in forks:
            swaps += sum(holds_no_secret(top, content, links) for top in fork.sandbox.writable_dirs)
            for level in (fork.workdir, *(fork.workdir / p for p in ("a", "a/b", "a/b/c"))):
                assert os.readlink(level / "link") == str(path)
                assert os.readlink(level / "dirlink") == str(secret_dir)
                assert os.readlink(level / "chained") == "link"
            assert os.readlink(fork.sandbox.tmpdir / "link") == str(path)
        assert swaps  # the swapped names were there to copy, as files or links
    finally:
        for fork in forks:
            await fork.close()


@pytest.mark.skipif(not ROOT, reason="only root makes device nodes")
def test_device_nodes_are_left_out_with_a_note(tmp_path: Path) -> None:
    source = tmp_path / "work"
    source.mkdir()
    os.mknod(source / "null", 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    (source / "file").write_text("kept\n")
    report = copy_tree(source, tmp_path / "copy")
    assert report.notes == ["skipped character device work/null"]
    assert os.listdir(tmp_path / "copy") == ["file"]


@pytest.mark.skipif(not ROOT, reason="drops to another uid, which needs root")
def test_what_its_owner_made_unreadable_is_reported_not_copied() -> None:
    """As a non-root owner who took away its own permissions: nobody (65534) copies its
    own tree in a child process (root reads anything)."""
    place = Path(tempfile.mkdtemp(prefix="turnbon-copies-"))
    try:
        place.chmod(0o711)
        source = place / "work"
        (source / "shut").mkdir(parents=True)
        (source / "shut" / "inner").write_text("inner\n")
        (source / "locked").write_text("locked\n")
        (source / "fine").write_text("fine\n")
        for path in (place, source, *source.rglob("*")):
            os.lchown(path, 65534, 65534)
        (source / "locked").chmod(0)
        (source / "shut").chmod(0)
        read, write = os.pipe()
        child = os.fork()
        if child == 0:  # pragma: no cover (the child reports through the pipe)
            try:
                os.setgid(65534)
                os.setuid(65534)
                report = copy_tree(source, place / "copy")
                os.write(write, json.dumps(report.unreadable).encode())
            finally:
                os._exit(0)
        os.close(write)
        with os.fdopen(read) as pipe:
            unreadable = json.loads(pipe.read() or "null")
        os.waitpid(child, 0)
        assert unreadable == ["work/locked (Permission denied)", "work/shut (Permission denied)"]
        assert sorted(os.listdir(place / "copy")) == ["fine"]
    finally:
        shutil.rmtree(place)


SOLVE_WITH_A_PIPE = "mkfifo p && echo 42 > answer.txt\n"
CHECK_ANSWER = """
    import os
    from pathlib import Path

    def test_answer() -> None:
        assert (Path(os.environ["TASK_WORKDIR"]) / "answer.txt").read_text() == "42\\n"
"""


def test_keep_workdir_after_an_agent_made_a_named_pipe_still_gives_the_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = write_task(tmp_path, "pipe-answer", CHECK_ANSWER)
    (folder / "solution" / "solve.sh").write_text(SOLVE_WITH_A_PIPE)
    # The stub model runs solve.sh as one shell call (with this seed, on the first turn).
    argv = ["run", str(folder), "--model", "stub", "-n", "4", "--seed", "0", "--keep-workdir"]
    code = main(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    assert "Verdict: PASS" in out and code == 0
    last = out.strip().splitlines()[-1]
    found = re.fullmatch(
        r"Working copy kept: (\S+) \(the episode ran in (\S+)\); "
        r"left out: skipped named pipe work/p",
        last,
    )
    assert found is not None, last
    kept, ran_in = Path(found.group(1)), Path(found.group(2))
    assert (kept / "answer.txt").read_text() == "42\n" and not (kept / "p").exists()
    assert not ran_in.exists()
    shutil.rmtree(kept.parent)
