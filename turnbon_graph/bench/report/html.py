"""One self-contained HTML file from a report's Markdown (`report.md`, `analysis.md`), to
send as it is: the PNG plots inlined as base64, tables sortable by a click on a column
header (a few lines of inline JavaScript), the styles inline; it fetches nothing when
opened. Only the Markdown these reports write is understood: headings, paragraphs,
`> ` notes, tables, images, `code` and **bold**."""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

HTML_FILE = "report.html"

_STYLE = """
body { font: 15px/1.5 system-ui, sans-serif; max-width: 1100px; margin: 2em auto;
       padding: 0 1em; color: #222; }
h1, h2 { line-height: 1.2; } h2 { margin-top: 2em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 1em 0; font-size: 14px; }
th, td { border: 1px solid #ccc; padding: 3px 8px; }
th { background: #f3f3f3; cursor: pointer; user-select: none; }
th[data-order="asc"]::after { content: " \\25B2"; }
th[data-order="desc"]::after { content: " \\25BC"; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
tr:nth-child(even) td { background: #fafafa; }
blockquote { border-left: 4px solid #e0a000; margin: 1em 0; padding: .2em 1em;
             background: #fff8e6; }
code { background: #f3f3f3; padding: 0 3px; border-radius: 3px; }
img { max-width: 100%; height: auto; display: block; margin: 1em 0; }
"""

_SCRIPT = """
function cellValue(row, column) {
  const text = row.cells[column].textContent.trim();
  const number = parseFloat(text.replace(/^[<\\[]\\s*/, "").replace(/[^0-9eE.+-].*$/, ""));
  const scale = /\\dM\\b/.test(text) ? 1e6 : /\\dK\\b/.test(text) ? 1e3 : 1;
  return isNaN(number) ? text.toLowerCase() : number * scale;
}
document.querySelectorAll("table").forEach((table) => {
  table.querySelectorAll("th").forEach((header, column) => {
    header.addEventListener("click", () => {
      const order = header.dataset.order === "asc" ? "desc" : "asc";
      table.querySelectorAll("th").forEach((h) => delete h.dataset.order);
      header.dataset.order = order;
      const body = table.tBodies[0];
      const rows = Array.from(body.rows);
      rows.sort((a, b) => {
        const x = cellValue(a, column), y = cellValue(b, column);
        const cmp = typeof x === typeof y ? (x < y ? -1 : x > y ? 1 : 0)
                                          : (typeof x === "number" ? -1 : 1);
        return order === "asc" ? cmp : -cmp;
      });
      rows.forEach((row) => body.appendChild(row));
    });
  });
});
"""

_IMAGE = re.compile(r"^!\[(?P<alt>[^\]]*)\]\((?P<src>[^)]+)\)$")


def write_html(markdown_path: Path, out: Path | None = None) -> Path:
    """`markdown_path` (its images read from beside it) as one HTML file, by default
    `report.html` in the same folder; returns its path."""
    text = markdown_path.read_text(encoding="utf-8")
    path = out or markdown_path.parent / HTML_FILE
    path.write_text(render_html(text, markdown_path.parent), encoding="utf-8")
    return path


def render_html(markdown: str, folder: Path) -> str:
    """The page for `markdown`; images are read from `folder` and inlined."""
    lines = markdown.splitlines()
    title = next((line[2:] for line in lines if line.startswith("# ")), "Report")
    body: list[str] = []
    paragraph: list[str] = []
    quote: list[str] = []

    def flush() -> None:
        if paragraph:
            body.append(f"<p>{inline(' '.join(paragraph))}</p>")
            paragraph.clear()
        if quote:  # a note of several lines: `>` alone between its paragraphs
            text = "<br>".join(inline(q) if q else "</p><p>" for q in quote)
            body.append(
                f"<blockquote><p>{text}</p></blockquote>".replace("<br></p><p><br>", "</p><p>")
            )
            quote.clear()

    index = 0
    while index < len(lines):
        line = lines[index].rstrip()
        if line.startswith("|"):
            flush()
            block = []
            while index < len(lines) and lines[index].startswith("|"):
                block.append(lines[index].rstrip())
                index += 1
            body.append(_table(block))
            continue
        heading = re.match(r"^(#{1,6}) (.*)$", line)
        image = _IMAGE.match(line)
        if heading:
            flush()
            level = len(heading.group(1))
            body.append(f"<h{level}>{inline(heading.group(2))}</h{level}>")
        elif image:
            flush()
            body.append(_image(image.group("alt"), folder / image.group("src")))
        elif line == ">" or line.startswith("> "):
            if paragraph:
                flush()
            quote.append(line[2:].strip())
        elif not line:
            flush()
        else:
            paragraph.append(line)
        index += 1
    flush()
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{inline(title)}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
        + "\n".join(body)
        + f"\n<script>{_SCRIPT}</script>\n</body>\n</html>\n"
    )


def inline(text: str) -> str:
    """Escaped text with `code` and **bold**."""
    parts = re.split(r"(`[^`]*`)", text)
    out = []
    for part in parts:
        if part.startswith("`") and part.endswith("`") and len(part) > 1:
            out.append(f"<code>{html.escape(part[1:-1])}</code>")
        else:
            out.append(re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", html.escape(part)))
    return "".join(out)


def _cells(line: str) -> list[str]:
    inner = line.strip()[1:-1] if line.strip().endswith("|") else line.strip()[1:]
    cells = re.split(r"(?<!\\)\|", inner)
    return [cell.strip().replace("\\|", "|") for cell in cells]


def _table(block: list[str]) -> str:
    header, *rest = block
    rows = rest
    numeric: list[bool] = []
    if rest and re.fullmatch(r"\|[\s:|-]+\|?", rest[0]):
        numeric = [cell.endswith(":") and not cell.startswith(":") for cell in _cells(rest[0])]
        rows = rest[1:]

    def attrs(column: int) -> str:
        return ' class="num"' if column < len(numeric) and numeric[column] else ""

    head = "".join(f"<th{attrs(i)}>{inline(c)}</th>" for i, c in enumerate(_cells(header)))
    body = "\n".join(
        "<tr>"
        + "".join(f"<td{attrs(i)}>{inline(c)}</td>" for i, c in enumerate(_cells(r)))
        + "</tr>"
        for r in rows
    )
    # A key-value table (markdown needs a header row) has an empty one: leave it out.
    thead = f"<thead><tr>{head}</tr></thead>\n" if any(_cells(header)) else ""
    return f"<table>\n{thead}<tbody>\n{body}\n</tbody>\n</table>"


def _image(alt: str, path: Path) -> str:
    if not path.is_file():
        return f"<p><em>{html.escape(alt)}: {html.escape(path.name)} is missing</em></p>"
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return (
        f'<figure><img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'
        f"<figcaption>{inline(alt)}</figcaption></figure>"
    )
