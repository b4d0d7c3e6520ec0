"""`make browser-test`: the course in a real browser, notebook by notebook, as a learner
meets it in JupyterLab (see notebook_check.py for what is checked and in which order).

Debian's Chromium is driven by playwright from a scratch venv; playwright downloads no
browser of its own. JupyterLab is started with `make lab` on a free port, serving a copy of
notebooks/ under the output folder, so the committed notebooks are never written. Writes
screenshots per notebook and summary.json there, prints one line per notebook as it goes and
a table at the end, and exits 1 if any count is not 0 (or was not measured).

    python tests/browser/run.py [--out build/browser-test] [--timeout 300] [NN ...]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

import psutil
from lab_server import MARKER, LabServer
from notebook_check import NotebookResult, check_in_browser
from playwright.sync_api import sync_playwright
from processes import describe

REPO = Path(__file__).resolve().parents[2]
# As root Chromium needs --no-sandbox; on a closed network its background requests
# (updates, sync, field trials) make it misbehave, so they are turned off.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
COLUMNS = ("seconds", "errors", "crosses", "widget_errors_after_reopen")
COLUMNS += ("processes_left_after_stop",)


def chosen_notebooks(numbers: list[str]) -> list[str]:
    """The course's notebooks (NN_topic.ipynb), or those whose number is in `numbers`."""
    names = sorted(p.name for p in (REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    if not numbers:
        return names
    chosen = [n for n in names if n[:2] in {x.zfill(2) for x in numbers}]
    unknown = {x.zfill(2) for x in numbers} - {n[:2] for n in chosen}
    if unknown:
        sys.exit(f"no notebook numbered {', '.join(sorted(unknown))} in notebooks/")
    return chosen


def line(result: NotebookResult) -> str:
    counts = ", ".join(f"{key} {getattr(result, key)}" for key in COLUMNS[1:])
    verdict = "clean" if result.clean else "PROBLEMS"
    return f"{result.notebook}: {result.seconds} s; {counts}: {verdict}"


def table(results: list[NotebookResult]) -> str:
    short = ("notebook", "seconds", "errors", "crosses", "widget errs", "procs left")
    width = max([len(short[0]), *(len(r.notebook) for r in results)])
    rows = [f"{short[0]:<{width}}  " + "  ".join(f"{h:>11}" for h in short[1:])]
    for r in results:
        cells = ["-" if getattr(r, key) is None else str(getattr(r, key)) for key in COLUMNS]
        rows.append(f"{r.notebook:<{width}}  " + "  ".join(f"{c:>11}" for c in cells))
    return "\n".join(rows)


def kill_leftovers(marker: str) -> None:
    """Whatever still carries this run's marker after the lab stopped: ours, so stopped."""
    left = []
    for process in psutil.process_iter():
        try:
            if process.environ().get(MARKER) == marker:
                left.append(process)
        except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
    if left:
        print("still running after the lab stopped; killing:\n" + describe(left), flush=True)
        for process in left:
            try:
                process.kill()
            except psutil.NoSuchProcess:
                pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("numbers", nargs="*", help="notebook numbers (default: all), e.g. 00 08")
    parser.add_argument("--out", type=Path, default=REPO / "build" / "browser-test")
    parser.add_argument("--timeout", type=float, default=300, help="Run All limit, seconds")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()
    names = chosen_notebooks(args.numbers)
    shutil.rmtree(args.out, ignore_errors=True)
    args.out.mkdir(parents=True)
    started = time.monotonic()
    results: list[NotebookResult] = []
    lab = LabServer(REPO, args.out)
    try:
        lab.start()
        print(f"JupyterLab on {lab.url}, serving {lab.root}; log in {lab.log_path}", flush=True)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=args.chromium, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(60_000)
            for name in names:
                results.append(check_in_browser(page, lab, name, args.out, args.timeout))
                print(line(results[-1]), flush=True)
                for note in results[-1].notes:
                    print("    " + note, flush=True)
            browser.close()
    finally:
        lab.stop()
        kill_leftovers(lab.marker)
    summary = {"notebooks": [r.summary() for r in results]}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False))
    minutes = (time.monotonic() - started) / 60
    print(f"\n{table(results)}\n\n{len(results)} notebooks in {minutes:.1f} minutes; ", end="")
    print(f"summary in {args.out / 'summary.json'}, screenshots in {args.out}/NN_*/")
    return 0 if results and all(r.clean for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
