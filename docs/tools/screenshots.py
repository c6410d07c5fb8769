"""Screenshots of the built site in headless Chromium, at a laptop's and a phone's width.

    python docs/tools/screenshots.py [--site build/site] [--out build/screenshots] [--page PATH ...]

Serves the site on 127.0.0.1 (its links are folder URLs, which file:// does not resolve), opens each
page, waits for its figures, and writes OUT/NAME-laptop.png and OUT/NAME-phone.png (the first
screen; NAME-laptop-full.png the whole page; NAME-WIDTH-figure.png the first figure in view). Prints, per page and width, how far the page is wider
than the window (a table or code block that does not wrap) and how many figures it drew.
Needs a Chromium (Debian's `chromium`; PLAYWRIGHT_CHROMIUM names another).

Example:
    >>> shoot(Path("build/site"), Path("/tmp/shots"), ["index.html"])  # doctest: +SKIP
    [{'page': 'index.html', 'width': 1366, 'overflow_px': 0, 'figures': 0, ...}, ...]
"""

from __future__ import annotations

import argparse
import functools
import http.server
import os
import shutil
import sys
import threading
from pathlib import Path

WIDTHS = {"laptop": (1366, 768), "phone": (390, 844)}
PAGES = ["index.html", "methods/coevokg/index.html", "notebooks/07_paper_figures/index.html",
         "notebooks/01_kg_walks/index.html", "results/index.html"]
# what a figure is on a page: plotly's div, or the static PNG a figure cell writes beside it
FIGURE = ".jp-OutputArea-output img, .js-plotly-plot"


def chromium() -> str:
    found = os.environ.get("PLAYWRIGHT_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        raise SystemExit("no Chromium: apt-get install chromium (or set PLAYWRIGHT_CHROMIUM to one)")
    return found


def _serve(site: Path) -> http.server.ThreadingHTTPServer:
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):  # one line a request would bury the summary
            pass

    handler = functools.partial(Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def shoot(site: Path, out: Path, pages: list[str] = PAGES) -> list[dict]:
    """Screenshot each page at each width into ``out``; one dict a page and width (see the module doc)."""
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    server = _serve(site)
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    seen = []
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
            for page_path in pages:
                name = page_path.removesuffix("/index.html").removesuffix(".html").replace("/", "_") or "index"
                for label, (width, height) in WIDTHS.items():
                    page = browser.new_page(viewport={"width": width, "height": height})
                    errors = []
                    page.on("pageerror", lambda e: errors.append(str(e)))
                    response = page.goto(base + page_path.removesuffix("index.html"), wait_until="networkidle")
                    page.wait_for_timeout(500)  # plotly lays out after load
                    page.screenshot(path=str(out / f"{name}-{label}.png"))
                    if label == "laptop":
                        page.screenshot(path=str(out / f"{name}-{label}-full.png"), full_page=True)
                    seen.append({"page": page_path, "width": width, "status": response.status if response else None,
                                 "overflow_px": page.evaluate("document.documentElement.scrollWidth - window.innerWidth"),
                                 "figures": page.locator(FIGURE).count(), "errors": errors})
                    if page.locator(FIGURE).count():  # the first figure in view, as a reader scrolls to it
                        page.locator(FIGURE).first.scroll_into_view_if_needed()
                        page.screenshot(path=str(out / f"{name}-{label}-figure.png"))
                    page.close()
            browser.close()
    finally:
        server.shutdown()
    return seen


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--site", type=Path, default=Path("build/site"))
    ap.add_argument("--out", type=Path, default=Path("build/screenshots"))
    ap.add_argument("--page", action="append", help="a page under the site, e.g. results/index.html")
    args = ap.parse_args(argv)
    if not (args.site / "index.html").exists():
        print(f"{args.site}/index.html: no site there; build it first (make docs)")
        return 1
    for row in shoot(args.site, args.out, args.page or PAGES):
        print(f"{row['page']:45} {row['width']:5} px  HTTP {row['status']}  wider by {row['overflow_px']} px  "
              f"{row['figures']} figure(s)  {len(row['errors'])} script error(s)")
    print(f"screenshots in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
