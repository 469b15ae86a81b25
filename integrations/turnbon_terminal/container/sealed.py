"""The verifier's phase of a container episode, sealed from the agent's processes.

Processes the agent left running keep running through verification (a task may need a
server), as under Harbor; but they must not write the verdict. So test.sh runs in a
mount namespace of its own, entered for it alone: a fresh tmpfs on `/logs/verifier`
and one on `/tests` (the task's tests unpacked there from the engine's stdin), which no
other process of the container sees, then test.sh as the image's user with the
container's default capabilities only (`setpriv`), within its time limit (`timeout -s
KILL`). Its reward files and the end of its output come back as a tar archive on the
exec's stdout and are read on this machine: nothing the agent's processes can reach is
read. Entering a mount namespace needs `CAP_SYS_ADMIN`, which only this one exec gets
(`exec --privileged`), dropped before test.sh starts.

An image without `unshare` and `setpriv` (util-linux) cannot be sealed: its tests run
as before, in reach of the agent's processes, and the verdict says so (evidence).

Before the tests, what the agent left is recorded as evidence: the processes still
running (the container's own, and the shell session's, aside), and the system files it
changed (the engine's diff of the container against its image: shells and other
programs, Python's site-packages, `.pth` and `sitecustomize` files, `ld.so.preload`).
"""

from __future__ import annotations

import io
import os
import re
import tarfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from turnbon_terminal.container.command import env_flags, kill_marked, marked
from turnbon_terminal.container.engine import ContainerError
from turnbon_terminal.container.instance import VERIFIER_LOGS, Container

TESTS = "/tests"
KEPT_FILES = ("reward.json", "reward.txt", "test-stdout.txt")
"""What comes back from the sealed phase (test.sh's output: its last 256 KiB)."""
OUTPUT_KEPT = 256 * 1024
DEFAULT_CAPS = (
    "chown,dac_override,fowner,fsetid,kill,net_bind_service,setfcap,setgid,setpcap,"
    "setuid,sys_chroot"
)
"""A container's default capabilities (Podman's): all test.sh gets."""
NO_SEAL = 97
"""The exit code of the sealed phase when the image lacks unshare or setpriv."""
EXEC_GRACE_S = 30.0
_OUTER = (
    "command -v unshare >/dev/null && command -v setpriv >/dev/null || exit 97; "
    'room="$1"; shift; exec unshare -m --propagation private sh -c "$room" sh "$@"'
)
"""Run as root with CAP_SYS_ADMIN: enters a mount namespace of its own for `_ROOM`."""
_ROOM = r"""
set -e
mount -t tmpfs -o mode=0777 turnbon-verifier /logs/verifier
mkdir -p /tests
mount -t tmpfs -o mode=0755 turnbon-tests /tests
tar -x -f - -C /tests --no-same-owner
set +e
user="$1"; limit="$2"; script="$3"; keep="$4"
as=""
if [ -n "$user" ] && [ "$user" != root ] && [ "$user" != 0 ]; then
  name="${user%%:*}"
  as="--reuid=$name --regid=$(id -g "$name" 2>/dev/null || echo "$name") --init-groups"
fi
limited=""
command -v timeout >/dev/null && limited="timeout -s KILL $limit"
setpriv $as --bounding-set=-all,+CAPS --inh-caps=-all -- $limited bash -c "$script" \
  > /logs/verifier/test-stdout.txt 2>&1 < /dev/null
echo $? > /logs/verifier/.exit
tail -c "$keep" /logs/verifier/test-stdout.txt > /logs/verifier/.tail 2>/dev/null
mv -f /logs/verifier/.tail /logs/verifier/test-stdout.txt
cd /logs/verifier
kept=$(ls -A | grep -E '^(reward[.]json|reward[.]txt|test-stdout[.]txt)$')
tar -c -f - --no-recursion -- .exit $kept
""".replace("CAPS", DEFAULT_CAPS.replace(",", ",+"))
"""In the namespace: the fresh folders, the tests from stdin (a tar archive), test.sh
as the user with the default capabilities; its files, as a tar archive, on stdout.
Arguments: the user, the time limit, test.sh's command line, the bytes of output kept."""
_PROCESSES = (
    'for d in /proc/[0-9]*; do p=${d#/proc/}; grep -qs "$1" "$d/environ" && continue; '
    'c=$(tr "\\0" " " < "$d/cmdline" 2>/dev/null); [ -n "$c" ] || continue; '
    'pp=$(sed -n "s/^PPid:\\t//p" "$d/status" 2>/dev/null); echo "$p $pp $c"; done'
)
"""Lists the container's processes (pid, ppid, command line), the lister's aside."""
PROGRAMS = re.compile(r"^/(?:usr/(?:local/)?)?s?bin/")
SYSTEM_PATHS = re.compile(
    r"^/(?:usr/(?:local/)?)?s?bin/|/(?:site|dist)-packages/|\.pth$|/(?:site|user)customize"
    r"\.py$|^/etc/ld\.so\.preload$|^/usr/lib/python3[^/]*/[^/]+\.py$"
)
"""System files whose change is evidence: programs, Python's packages and start-up."""


@dataclass
class SealedRun:
    """What the sealed phase did: test.sh's exit code and whether its limit ended it,
    or None when the image could not be sealed."""

    exit_code: int | None
    timed_out: bool


async def run_sealed(
    container: Container,
    tests: bytes,
    script: str,
    *,
    user: str,
    limit: float,
    env: Mapping[str, str],
    into: Path,
) -> SealedRun:
    """Runs `script` (test.sh's command line) sealed (see the module) with `tests` (a tar
    archive) at /tests; writes what came back into the new host folder `into`.

    Raises:
        ContainerError: the engine could not run it.
    """
    token = marked()
    flags = ["exec", "-i", "--privileged", "-u", "0", "-w", container.workdir, "-e", token]
    flags += env_flags(env)
    argv = ["sh", "-c", _OUTER, "sh", _ROOM, user, f"{limit:.3f}", script, str(OUTPUT_KEPT)]
    began = time.monotonic()
    try:
        done = await container.engine.call(
            *flags, container.name, *argv, stdin=tests, limit_s=limit + EXEC_GRACE_S,
            check=False,
        )  # fmt: skip
    except BaseException:
        await kill_marked(container.engine, container.name, token)
        raise
    if done.code == NO_SEAL:
        return SealedRun(None, False)
    if done.code != 0:
        raise ContainerError(f"the sealed verifier did not run: {done.said}")
    exit_code = _unpack(done.out, into)
    timed_out = exit_code == 137 and time.monotonic() - began >= limit
    return SealedRun(exit_code, timed_out)


def _unpack(archive: bytes, into: Path) -> int:
    """Writes the files of the sealed phase's archive into `into` (blocking: small);
    returns test.sh's exit code. A link stays a link and anything else that is no
    regular file becomes a FIFO, so the reward's reader refuses it as it would there."""
    into.mkdir(parents=True, exist_ok=True)
    code = -1
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:") as files:
        for member in files.getmembers():
            name = member.name.removeprefix("./")
            if name not in (*KEPT_FILES, ".exit"):
                continue
            reader = files.extractfile(member) if member.isfile() else None
            if reader is None:
                if member.issym() or member.islnk():
                    os.symlink(member.linkname, into / name)
                else:
                    os.mkfifo(into / name)
                continue
            data = reader.read(OUTPUT_KEPT)
            if name == ".exit":
                code = int(data.strip() or b"-1")
            else:
                (into / name).write_bytes(data)
    return code


async def left_processes(container: Container, session_marks: Sequence[str] = ()) -> list[str]:
    """The processes still running in `container` once the agent's phase ended: its
    init and main process, and the shell session's own (their command lines hold one
    of `session_marks`), aside."""
    token = marked()
    try:
        lines = await container.engine.lines(
            "exec", "-u", "0", "-e", token, container.name, "sh", "-c", _PROCESSES, "sh", token
        )
    except ContainerError:
        return []
    main = f"sleep {int(container.lifetime_s)}"
    left = []
    for line in lines:
        pid, ppid, command = [*line.split(" ", 2), "", ""][:3]
        command = command.strip()
        if pid == "1" or (ppid == "1" and command == main):
            continue
        if any(mark in command for mark in session_marks):
            continue
        left.append(f"{pid} {command[:120]}")
    return left


async def changed_system_files(container: Container) -> list[str]:
    """The system files the agent added or changed (the engine's diff against the
    image), those that can change how the tests run."""
    try:
        lines = await container.engine.lines("diff", container.name)
    except ContainerError:
        return []
    changed = []
    for line in lines:
        kind, _, path = line.strip().partition(" ")
        if kind not in ("A", "C") or not SYSTEM_PATHS.search(path):
            continue
        # A program added (an install) is no evidence; one replaced, or Python's start-up, is.
        if kind == "C" or not PROGRAMS.match(path):
            changed.append(f"{kind} {path}")
    return changed


NO_UTIL_LINUX = "the image has no unshare and setpriv (util-linux) to seal them"
HOST_TESTS = (
    "a host task's pytest tests are not sealed in a container (the host sandbox's "
    "verifier defends them: run it without --sandbox container)"
)
"""Why a verifier ran unsealed, in its evidence."""


def evidence(processes: Sequence[str], files: Sequence[str], unsealed: str | None) -> list[str]:
    """The verdict's evidence from what the agent left (see the module); `unsealed`:
    why the tests ran in reach of the agent's processes, if they did."""
    found = []
    if processes:
        more = f"; and {len(processes) - 10} more" if len(processes) > 10 else ""
        found.append(
            f"processes left running when the agent's phase ended: {'; '.join(processes[:10])}"
            + more
        )
    if files:
        more = f", and {len(files) - 20} more" if len(files) > 20 else ""
        found.append(f"system files changed by the agent's phase: {', '.join(files[:20])}{more}")
    if unsealed is not None:
        found.append(
            f"the verifier ran in reach of the agent's processes ({VERIFIER_LOGS} and "
            f"{TESTS} were theirs too): {unsealed}"
        )
    return found


async def image_user(container: Container) -> str:
    """The user the container's image runs as ("" for root)."""
    said = await container.engine.lines("inspect", "--format", "{{.Config.User}}", container.name)
    return said[0].strip() if said else ""
