"""URL slugs for article titles."""

from __future__ import annotations

import re
import unicodedata


def slugify(title: str, max_length: int = 50) -> str:
    """Turns a title into a URL slug.

    Accented letters lose their accents (é becomes e), letters become lower case, and
    every run of characters other than ASCII letters and digits becomes one hyphen;
    the slug never starts or ends with a hyphen. A slug longer than `max_length` is
    cut to its first `max_length` characters, and then loses any trailing hyphen.
    An empty slug is returned as "untitled".
    """
    text = unicodedata.normalize("NFKD", title)
    text = text.encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^a-z0-9]", "-", text)
    text = text.strip("-")
    text = text[: max_length + 1]
    return text or "untitled"
