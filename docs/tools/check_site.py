"""Every internal link of the built site resolves: the file, and the anchor in it (`make docs`).

    python docs/tools/check_site.py [build/site]

MkDocs' strict mode checks the links of Markdown pages; this checks the HTML it wrote, so the
notebooks' pages, the generated pages and the theme's own links are covered too. External links
(a scheme, or //host) are not followed: the site builds and is read offline.

Example:
    >>> broken_links(Path("build/site"))  # doctest: +SKIP
    []
"""

from __future__ import annotations

import sys
from functools import cache
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit


class _Page(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.links: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("name"):
            self.ids.add(attrs["name"])
        for key in ("href", "src"):
            if attrs.get(key) and not (tag == "link" and key == "href" and attrs.get("rel") == "canonical"):
                self.links.append(attrs[key])


@cache
def _parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(errors="replace"))
    return page


def _target(site: Path, page: Path, path: str) -> Path:
    base = site if path.startswith("/") else page.parent  # 404.html links from the site's root
    target = (base / unquote(path.lstrip("/"))).resolve() if path else page
    return target / "index.html" if target.is_dir() else target


def broken_links(site: Path) -> list[str]:
    """'PAGE: LINK' for each internal link of each HTML page under ``site`` that resolves to nothing."""
    site = site.resolve()
    _parse.cache_clear()
    broken = []
    for page in sorted(site.rglob("*.html")):
        for link in _parse(page).links:
            parts = urlsplit(link)
            if parts.scheme or link.startswith("//"):
                continue
            target = _target(site, page, parts.path)
            if not target.exists() or site not in target.parents:
                broken.append(f"{page.relative_to(site)}: {link}")
            elif parts.fragment and target.suffix == ".html" and unquote(parts.fragment) not in _parse(target).ids:
                broken.append(f"{page.relative_to(site)}: {link}")
    return broken


def main(argv: list[str] | None = None) -> int:
    site = Path((argv or sys.argv[1:] or ["build/site"])[0])
    if not (site / "index.html").exists():
        print(f"{site}/index.html: no site there; build it first (make docs)")
        return 1
    broken = broken_links(site)
    for line in broken:
        print(f"broken link: {line}")
    pages = len(list(site.rglob("*.html")))
    print(f"{pages} pages checked: {len(broken)} broken internal link(s)")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
