"""`make site-test`: the course's website opened in Chromium, three pages screenshotted.

The landing page with the course map, notebook 05 (charts, outputs and verdicts as
committed) and the setup page. Each must load with no failed request (a picture or a
stylesheet the build left out), show its title, and, for the notebook, its charts; the
screenshots are written beside the site for a person to look at.

    python tests/browser/site_pages.py --site build/site --chromium /usr/bin/chromium
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from playwright.sync_api import sync_playwright
from run import CHROMIUM_ARGS

PAGES = {  # page: (text its title must hold, the least number of pictures it shows)
    "index.html": ("Parallel training, hands on", 12),
    "05_allreduce_algorithms.html": ("Allreduce from scratch", 3),
    "setup.html": ("Quick start", 0),
}


def check(site: Path, chromium: str, out: Path) -> list[str]:
    problems = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        for name, (title, pictures) in PAGES.items():
            page, failed = browser.new_page(viewport={"width": 1280, "height": 900}), []
            page.on("requestfailed", lambda request, failed=failed: failed.append(request.url))
            page.goto((site / name).resolve().as_uri())
            page.wait_for_load_state("load")
            shown = page.eval_on_selector_all(
                "img", "imgs => imgs.filter(i => i.complete && i.naturalWidth > 0).length"
            )
            if title not in page.title():
                problems.append(f"{name}: title {page.title()!r} lacks {title!r}")
            if shown < pictures:
                problems.append(f"{name}: {shown} pictures shown, {pictures} expected")
            problems += [f"{name}: failed to load {url}" for url in failed]
            page.screenshot(path=str(out / name.replace(".html", ".png")))
            page.close()
        browser.close()
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", type=Path, default=Path("build/site"))
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--out", type=Path, default=Path("build/site-test"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    problems = check(args.site, args.chromium, args.out)
    for line in problems:
        print(f"site-test: {line}")
    print(f"site-test: {len(PAGES)} pages, {len(problems)} problems; screenshots in {args.out}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
