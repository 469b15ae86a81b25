"""The shell scanner: a command line becomes words and operators under bash's quoting
rules (`line_tokens`), then simple commands with their redirections, heredoc bodies and
substitutions (`parse_line`), and what each simple command reads on stdin (`stdin_of`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

WRITE_REDIRECTS = frozenset({">", ">>", ">|", "&>", "&>>", ">&", "<>"})
_HEREDOC_OPS = frozenset({"<<", "<<-"})
_REDIRECTS = WRITE_REDIRECTS | _HEREDOC_OPS | {"<", "<<<", "<&"}
_OPERATORS = sorted(
    {"&&", "||", ";;", ";&", ";;&", "|&", "&", ";", "|", "(", ")", "\n", *_REDIRECTS},
    key=len,
    reverse=True,
)
_OPERATOR_CHARS = frozenset("&;|()<>")
_RESERVED = frozenset(
    {"if", "then", "elif", "else", "fi", "do", "done", "while", "until", "!", "{", "}", "esac"}
)


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
    """Words and operators of a command line (see the package docstring). With `literal`,
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


def line_tokens(text: str) -> list[_Token]:
    """The shell words and operators of a command line (a plain word split when bash would refuse
    the line)."""
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


def parse_line(tokens: list[_Token]) -> list[_Simple]:
    """The simple commands of a tokenised line, with their redirections and whether a pipe feeds
    them."""
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


class Stdin(NamedTuple):
    """What a simple command reads on stdin: a heredoc or here-string (`code`), or data
    from a pipe or a file (`fed`)."""

    code: str | None = None
    fed: bool = False


def stdin_of(simple: _Simple) -> Stdin:
    """What a simple command reads on its standard input: a heredoc's or here-string's body, a
    file, a pipe, or nothing."""
    stdin = Stdin(fed=simple.piped)
    for op, target, body in simple.redirects:
        if op in _HEREDOC_OPS:
            stdin = Stdin(body or "", True)
        elif op == "<<<":
            stdin = Stdin(target, True)
        elif op == "<":
            stdin = Stdin(stdin.code, True)
    return stdin
