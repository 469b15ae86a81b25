"""The agent's persistent shell in a container: one bash session per episode, in tmux
(as Terminus-2 keeps one), so that `cd`, variables, functions, background jobs and
running programs carry over from one `shell` call to the next.

The protocol. The session starts when the episode does, as the image's user, in the
working directory, with the agent's command variables:
`tmux -S DIR/sock new-session -d -x 160 -y 40 "bash --noprofile --rcfile DIR/rc -i"`,
DIR being `/tmp/.turnbon-shell-<token>` (history of 10000 lines, no status line, the
pane kept when its shell exits). The rc file sets `PROMPT_COMMAND`: before each prompt
that follows one of our commands it writes the shell's directory (`DIR/cwd`), its
exported variables (`export -p` into `DIR/env`) and the command's exit status
(`DIR/done-<id>`); the prompt, `$PWD$ `, ends by setting the pane's title to
`tb:<id>` (an invisible escape), so once the title reads so, tmux has drawn every byte
the command printed.

Each call is one `<engine> exec` of `_STEP`, a bash script run in the container:

- The shell is at its prompt: the command (any text, several lines included) is written
  to `DIR/c<id>`, the history cleared, and ` __tb_id=<id>; . DIR/c<id>` typed with
  Enter, so the command runs in the shell itself. The script waits until `done-<id>`
  appears (or the pane's shell exits, or the time limit passes), then reads the pane:
  the command's output is what follows the typed line, up to the prompt.
- A command is still running (it outlived an earlier call's limit): `keys` are sent
  first (tmux key names: `C-c`, `C-d`, `Enter`, ...), then the command is typed as a
  line of input; the script waits until that command ends, or until the screen has not
  changed for a second, or the limit; the reply is the screen.

A command that does not end within its limit keeps running; the reply says so and shows
the screen. When the shell itself exits (`exit`, `set -e` and a failure), the reply
shows its last screen, and the next call starts a new shell in the directory, with the
exported variables, that the last finished command left. A fork's shell starts the same
way from its parent's (`ShellState`). An image without tmux gets no session
(`Session.open` returns None): its episodes run each command in a fresh `bash -c`.
"""

from __future__ import annotations

import asyncio
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from turnbon_terminal.container.command import COMMAND_ENV, env_flags
from turnbon_terminal.container.engine import ContainerError
from turnbon_terminal.errors import SandboxError
from turnbon_terminal.output import CappedOutput

if TYPE_CHECKING:
    from turnbon_terminal.container.instance import Container

WIDTH, HEIGHT = 160, 40
"""The terminal's size (Terminus-2's)."""
HISTORY_LINES = 10_000
"""Lines of a command's output the terminal keeps: past them its start is lost."""
START_LIMIT_S = 60.0
CALL_GRACE_S = 60.0
"""How long past a call's limit the engine's client may take before it is killed."""
_NO_TMUX = 42

FOLDER_PREFIX = "/tmp/.turnbon-shell-"
"""Where a session's socket and files are: in the command lines of its own processes."""

_TMUX_CONF = (
    f"set -g history-limit {HISTORY_LINES}\n"
    "set -g remain-on-exit on\nset -g status off\nset -g escape-time 0\n"
)
_RC = r"""# turnbon's shell session (turnbon_terminal.container.session)
if [ -s @D/env0 ]; then
  __tb_t=$TMUX __tb_p=$TMUX_PANE
  . @D/env0 2>/dev/null
  export TMUX="$__tb_t" TMUX_PANE="$__tb_p"
  unset __tb_t __tb_p
fi
if [ -s @D/cwd0 ]; then cd -- "$(cat @D/cwd0)" 2>/dev/null; fi
HISTCONTROL=ignorespace
PS1='${PWD}$ \[\e]2;tb:${__tb_last-}\e\\\]'
__tb_prompt() {
  local rc=$?
  if [ -n "${__tb_id-}" ]; then
    pwd > @D/cwd 2>/dev/null
    export -p > @D/env 2>/dev/null
    printf '%s\n' "$rc" > @D/done-$__tb_id
    __tb_last=$__tb_id
    __tb_id=
  fi
}
PROMPT_COMMAND=__tb_prompt
"""
_START = f"""D=$1
command -v tmux >/dev/null 2>&1 || exit {_NO_TMUX}
mkdir -m 700 "$D" || exit 3
printf '%s' "$2" > "$D/rc"
printf '%s' "$3" > "$D/tmux.conf"
{{ IFS= read -r cwd; printf '%s' "$cwd" > "$D/cwd0"; cat > "$D/env0"; }}
exec tmux -S "$D/sock" -f "$D/tmux.conf" new-session -d -s turnbon -x {WIDTH} -y {HEIGHT} \\
  -c "$PWD" "exec bash --noprofile --rcfile $D/rc -i"
"""
"""Starts the session: `bash -c _START bash DIR RC CONF`, the state to start from on stdin
(its directory on the first line, then `export -p`'s lines; nothing: the workdir)."""
_STEP = r"""D=$1 new=$2 pending=$3 limit_ms=$4; shift 4
t() { tmux -S "$D/sock" "$@"; }
now() { local n=${EPOCHREALTIME/[.,]/}; echo "${n:-${SECONDS}000000}"; }
if ! t has-session -t turnbon 2>/dev/null; then echo lost; exit 0; fi
cat > "$D/c$new"
fin=- finrc=-
if [ "$pending" != - ] && [ -e "$D/done-$pending" ]; then
  fin=$pending finrc=$(cat "$D/done-$pending") pending=-
fi
if [ $# -gt 0 ]; then t send-keys -t turnbon -- "$@"; fi
settle= wait=-
if [ "$pending" = - ]; then
  if [ -s "$D/c$new" ]; then
    t clear-history -t turnbon
    t send-keys -t turnbon -l -- " __tb_id=$new; . $D/c$new"
    t send-keys -t turnbon Enter
    wait=$new
  else
    settle=1
  fi
else
  wait=$pending
  if [ -s "$D/c$new" ]; then
    t send-keys -t turnbon -l -- "$(cat "$D/c$new")"
    t send-keys -t turnbon Enter
    settle=1
  fi
  if [ $# -gt 0 ]; then settle=1; fi
fi
end=$(( $(now) + limit_ms * 1000 ))
state=running prev= still=0
while :; do
  if [ "$wait" != - ] && [ -e "$D/done-$wait" ]; then state=done; break; fi
  if [ "$(t display -p -t turnbon '#{pane_dead}' 2>/dev/null)" = 1 ]; then
    state=exited; break
  fi
  if [ -n "$settle" ]; then
    cur=$(t capture-pane -p -t turnbon)
    if [ "$cur" = "$prev" ]; then still=$((still + 1)); else still=0 prev=$cur; fi
    if [ $still -ge 8 ]; then break; fi
  fi
  if [ "$(now)" -ge $end ]; then break; fi
  sleep 0.1
done
rc=-
if [ $state = done ]; then
  rc=$(cat "$D/done-$wait")
  for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
    if [ "$(t display -p -t turnbon '#{pane_title}')" = "tb:$wait" ]; then break; fi
    sleep 0.05
  done
elif [ $state = exited ]; then
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    rc=$(t display -p -t turnbon '#{pane_dead_status}' 2>/dev/null)
    if [ -n "$rc" ]; then break; fi
    sleep 0.1
  done
fi
printf '%s %s %s %s %s\n' "$state" "$wait" "${rc:--}" "$fin" "$finrc"
printf '%s\n' "$(cat "$D/cwd" 2>/dev/null)"
if [ $state = done ] && [ "$wait" = "$new" ]; then
  t capture-pane -p -J -S - -t turnbon
else
  t capture-pane -p -J -t turnbon
fi
if [ $state = exited ]; then t kill-server; fi
exit 0
"""
"""One call: `bash -c _STEP bash DIR ID PENDING LIMIT_MS [KEY...]`, the command on stdin.
Prints `STATE WAITED RC FINISHED FINISHED_RC`, the shell's directory, then the pane."""
_STATE = 'cat "$1/cwd" && cat "$1/env"'
_TYPED = re.compile(r" __tb_id=(\d+); \. \S+/c\d+")


@dataclass(frozen=True)
class ShellState:
    """What a new shell starts from: a directory and `export -p`'s lines."""

    cwd: str
    exports: str


@dataclass
class ShellReply:
    """What one call to the session did; `render()` is what the agent reads."""

    text: str
    """The command's output (when it ended in this call), else the screen."""
    state: Literal["done", "running", "exited", "lost"]
    exit_code: int | None
    """The exit status of the command that ended (`done`), or of the shell (`exited`)."""
    limit: float
    screen: bool = False
    """`text` is the screen (the command ran past an earlier call), not its output."""
    finished: int | None = None
    """The exit status of the command that had ended before this call began."""
    cwd: str = ""
    over_budget: str | None = None

    @property
    def ok(self) -> bool:
        return self.state == "done" and self.exit_code == 0

    def render(self) -> str:
        lines = []
        if self.finished is not None:
            lines.append(f"[the previous command ended meanwhile, exit code {self.finished}]")
        lines.append(self.text or ("(empty screen)" if self.screen else "(no output)"))
        if self.state == "done":
            lines.append(f"[exit code {self.exit_code}]")
        elif self.state == "running":
            lines.append(
                "[the command is still running; above is the screen. The next call's "
                "`command` is typed into it as input, `keys` sends keys (C-c interrupts "
                f"it), a call with neither waits up to {self.limit:g} s more]"
            )
        elif self.state == "exited":
            code = f" (exit code {self.exit_code})" if self.exit_code is not None else ""
            lines.append(
                f"[the shell exited{code}; the next call starts a new one in the "
                "directory, with the exported variables, the last finished command left]"
            )
        else:
            lines.append(
                "[the shell's session was lost (its files in /tmp were removed?); the next "
                "call starts a new one]"
            )
        if self.over_budget:
            lines.append(f"[the episode went over its budget ({self.over_budget}): it ends here]")
        return "\n".join(lines)


class Session:
    """One episode's shell session (see the module); made by `Session.open`."""

    def __init__(self, container: Container, state: ShellState | None) -> None:
        self.container = container
        self.folder = ""
        self._start_from = state
        self._live = False
        self._pending: int | None = None
        self._next = 1
        self._commands: dict[str, str] = {}
        self._lock = asyncio.Lock()

    @classmethod
    async def open(cls, container: Container, state: ShellState | None = None) -> Session | None:
        """A started session in `container`, its shell in `state`'s directory with its
        variables (default: the working directory); None when the image has no tmux."""
        session = cls(container, state)
        return session if await session._start() else None

    async def _start(self) -> bool:
        container = self.container
        self.folder = f"{FOLDER_PREFIX}{secrets.token_hex(4)}"
        env = {key: value for key, value in COMMAND_ENV.items() if key != "TERM"}
        env |= container.settings.env
        flags = ["exec", "-i", "-w", container.workdir, *env_flags(env)]
        rc = _RC.replace("@D", self.folder)
        state = self._start_from
        stdin = f"{state.cwd}\n{state.exports}" if state is not None else ""
        done = await container.engine.call(
            *flags, container.name, "bash", "-c", _START, "bash", self.folder, rc, _TMUX_CONF,
            stdin=stdin.encode(), limit_s=START_LIMIT_S, check=False,
        )  # fmt: skip
        if done.code in (_NO_TMUX, 126, 127):  # no tmux, or no bash
            return False
        if done.code != 0:
            raise ContainerError(f"the shell session did not start: {done.said}")
        self._live, self._pending = True, None
        return True

    async def state(self) -> ShellState | None:
        """The directory and exported variables the last finished command left (None
        before any ended)."""
        done = await self.container.engine.call(
            "exec", self.container.name, "sh", "-c", _STATE, "sh", self.folder, check=False
        )
        if done.code != 0:
            return None
        cwd, _, exports = done.out.decode(errors="replace").partition("\n")
        return ShellState(cwd, exports)

    async def send(
        self, command: str = "", keys: Sequence[str] = (), *, time_limit: float | None = None
    ) -> ShellReply:
        """Runs `command` in the shell, or types it into the command still running
        there, after sending `keys` (tmux key names); waits up to `time_limit` seconds
        (default: the command timeout). Never raises for the command's own failure."""
        container = self.container
        if container.closed:
            raise SandboxError("this episode is closed: start a new one to run commands")
        limit = container.settings.command_timeout if time_limit is None else time_limit
        async with self._lock:
            if not self._live:
                self._start_from = await self.state()
                await self._start()
            reply = await self._step(command, list(keys), limit)
        reply.over_budget = await container.check_budget()
        return reply

    async def _step(self, command: str, keys: list[str], limit: float) -> ShellReply:
        container = self.container
        new, self._next = self._next, self._next + 1
        pending = str(self._pending) if self._pending is not None else "-"
        if command.strip() and self._pending is None:
            self._commands[str(new)] = command.strip().splitlines()[0]
        done = await container.engine.call(
            "exec", "-i", container.name, "bash", "-c", _STEP, "bash", self.folder, str(new),
            pending, str(int(limit * 1000)), *keys,
            stdin=command.encode(), limit_s=limit + CALL_GRACE_S, check=False,
        )  # fmt: skip
        said = done.out.decode(errors="replace")
        head, _, rest = said.partition("\n")
        fields = head.split()
        if done.code != 0 or not fields:
            raise ContainerError(f"the shell session did not answer: {done.said}")
        if fields[0] == "lost":
            self._live, self._pending = False, None
            return ShellReply("", "lost", None, limit, screen=True)
        state, waited, code, finished, finished_code = fields
        cwd, _, text = rest.partition("\n")
        reply = ShellReply(
            "",
            state,  # type: ignore[arg-type]
            int(code) if code.lstrip("-").isdigit() else None,
            limit,
            screen=not (state == "done" and waited == str(new)),
            finished=int(finished_code) if finished != "-" and finished_code.isdigit() else None,
            cwd=cwd,
        )
        if state == "running":
            self._pending = int(waited) if waited != "-" else None
        else:
            self._pending = None
        if state == "exited":
            self._live = False
        shown = self._screen(text) if reply.screen else _output(text, new, cwd)
        sink = CappedOutput(container.settings.output_limit)
        sink.add(shown.encode())
        reply.text = sink.text()
        return reply

    def _screen(self, text: str) -> str:
        """The pane as the agent reads it: our typed lines shown as the commands they
        ran, trailing blank lines left out."""
        lines = [
            _TYPED.sub(lambda m: self._commands.get(m[1], "(a command)"), line).rstrip()
            for line in text.splitlines()
        ]
        return "\n".join(lines).rstrip("\n")


def _output(text: str, new: int, cwd: str) -> str:
    """What command `new` printed: the pane's lines after the line that typed it, up to
    the prompt that followed it (`$PWD$ `)."""
    lines = [line.rstrip() for line in text.splitlines()]
    typed = [i for i, line in enumerate(lines) if f" __tb_id={new}; . " in line]
    if typed:
        lines = lines[typed[-1] + 1 :]
    else:
        cut = (
            "[its first lines are gone: the screen was cleared, or they were past the "
            f"{HISTORY_LINES} lines the terminal keeps]"
        )
        lines = [cut, *lines]
    while lines and not lines[-1]:
        lines.pop()
    prompt = f"{cwd}$"
    if lines and lines[-1].endswith(prompt):
        lines[-1] = lines[-1][: -len(prompt)]
        if not lines[-1]:
            lines.pop()
    return "\n".join(lines)
