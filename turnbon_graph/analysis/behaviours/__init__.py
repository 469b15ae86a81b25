r"""Behaviour tags of a shell action: the eight behaviours of Figure 4 of the Turn-BoN paper
(docs/references.md), defined in its Table 4.

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
   the core because it cannot tell an operator from a quoted one (`find -exec rm {} \;`),
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

The modules: `scanner` (steps 1 and 2), `tables` (the program tables; judgement calls
where Table 4 is silent are documented there), `rules` and `facts` (step 3), `tagger`
(step 4 and `declares_complete`).
"""

from turnbon_graph.analysis.behaviours.tagger import TAGS, Executed, declares_complete, tag_command

__all__ = ["TAGS", "Executed", "declares_complete", "tag_command"]
