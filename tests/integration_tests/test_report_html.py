"""report.html, written by `turnbon report` and `turnbon analyze`: one self-contained
file (plots inlined, sortable tables, nothing fetched), and what headless Chromium shows
of it with no network is a page, not a blank."""

from __future__ import annotations

import base64
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from turnbon_graph.bench.report.html import render_html
from turnbon_graph.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_RUN = ROOT / "docs" / "example-run"
PNG = b"\x89PNG\r\n\x1a\n"


def external_references(page: str) -> list[str]:
    """Anything the page would load from elsewhere: http(s) sources, links, imports."""
    found = re.findall(r"""(?:src|href)\s*=\s*["']?(?!data:)[^"'\s>]+""", page)
    found += re.findall(r"https?://", page)
    found += re.findall(r"<link\b|@import|url\(", page)
    return found


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """report.html of `turnbon report` and of `turnbon analyze` on the example run."""
    out = tmp_path_factory.mktemp("html")
    run = out / "run"
    shutil.copytree(EXAMPLE_RUN, run)
    assert main(["report", str(run), "--out", str(out / "report"), "--resamples", "200"]) == 0
    assert main(["analyze", str(run), "--out", str(out / "analysis"), "--resamples", "200"]) == 0
    return {"report": out / "report" / "report.html", "analysis": out / "analysis" / "report.html"}


@pytest.mark.parametrize("name", ["report", "analysis"])
def test_report_html_is_one_self_contained_file(pages: dict[str, Path], name: str) -> None:
    page = pages[name].read_text(encoding="utf-8")
    assert external_references(page) == []
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    pngs = sorted(p.name for p in pages[name].parent.glob("*.png"))
    assert len(images) == len(pngs) >= 3  # every plot of the Markdown, inlined
    assert all(base64.b64decode(data).startswith(PNG) for data in images)
    assert page.count("<table>") >= 3 and 'addEventListener("click"' in page  # sortable
    assert "<th" in page and "Figure" in page


def test_tables_and_inline_marks_become_html(tmp_path: Path) -> None:
    markdown = (
        "# Run `r`\n\n## Pass rate (Figure 2a)\n\nSome **bold** & <text>.\n\n"
        "| Setting | Rate |\n| :-- | --: |\n| N=1 | 50.0% |\n| a \\| b | 7.5% |\n\n"
        "> a note\n>\n> `more`  \n> and more\n\n![Figure 2a: the plot](missing.png)\n"
    )
    page = render_html(markdown, tmp_path)
    assert "<title>Run <code>r</code></title>" in page
    assert "<h2>Pass rate (Figure 2a)</h2>" in page
    assert "Some <strong>bold</strong> &amp; &lt;text&gt;." in page
    assert '<th class="num">Rate</th>' in page and "<td>a | b</td>" in page
    assert '<td class="num">7.5%</td>' in page
    assert "<blockquote><p>a note</p><p><code>more</code><br>and more</p></blockquote>" in page
    assert "missing.png is missing" in page


def test_a_key_value_table_has_no_empty_header_row(tmp_path: Path) -> None:
    page = render_html("# Run\n\n| | |\n| :-- | :-- |\n| Model | stub |\n", tmp_path)
    assert "<th></th>" not in page and "<thead>" not in page
    assert "<tr><td>Model</td><td>stub</td></tr>" in page


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(
    chromium() is None,
    reason="headless Chromium is not installed (`make setup-test` installs Debian's chromium)",
)
def test_chromium_shows_the_page_with_no_network(pages: dict[str, Path], tmp_path: Path) -> None:
    from PIL import Image, ImageStat

    shot = tmp_path / "shot.png"
    command = [
        str(chromium()),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-proxy-server",
        "--hide-scrollbars",
        "--window-size=1200,1600",
        f"--user-data-dir={tmp_path / 'profile'}",
        f"--screenshot={shot}",
        pages["report"].as_uri(),
    ]
    offline = shutil.which("unshare")
    if offline and subprocess.run([offline, "-n", "true"], capture_output=True).returncode == 0:
        command = [offline, "-n", *command]  # no network at all, not only no proxy
    subprocess.run(command, capture_output=True, timeout=120, check=True)
    with Image.open(shot) as image:
        gray = image.convert("L")
        # A blank page is one colour; the report has text, tables and plots.
        assert gray.getextrema()[0] < 100 and ImageStat.Stat(gray).stddev[0] > 10
        colours = image.convert("RGB").getcolors(maxcolors=1 << 16)
        assert colours is None or len(colours) > 50
