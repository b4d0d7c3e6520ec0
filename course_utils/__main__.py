"""`python -m course_utils doctor | bench NAME | data NAME | sweep CONFIG | run [NOTEBOOK ...]`."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys

from .core.errors import CourseError


def doctor(args) -> int:
    """Print what the course will run with, and fail loudly on what would break it."""
    from .course.doctor import print_report, report

    facts, problems = report()
    if args.json:
        print(json.dumps({**facts, "problems": problems}, indent=1, default=str))
        return 1 if problems else 0
    print_report(facts)
    if problems:
        print("\nThe course cannot run as it is:", file=sys.stderr)
        for p in problems:
            print(f"  - {p}", file=sys.stderr)
        return 1
    print("\nall good: `make lab` opens the course.")
    return 0


def bench(args) -> int:
    if args.json:  # stdout holds the JSON alone: what the bench says on the way goes to stderr
        with contextlib.redirect_stdout(sys.stderr):
            result = args.bench_module.run(args)
        print(json.dumps(result))
        return 0
    result = args.bench_module.run(args)
    if hasattr(args.bench_module, "text"):
        print(args.bench_module.text(result))
    else:
        for key, value in result.items():
            print(f"{key:>20}: {value}")
    return 0


def data_command(args) -> int:
    from .core import data

    if args.dataset == "mnist1d":
        print(data.mnist1d())
    else:
        print(data.cifar10(download=True))
    print(json.dumps(data.status(), indent=1))
    return 0


def run_notebooks(args) -> int:
    from .course import notebook_files
    from .course import runner as notebooks

    paths = notebook_files.resolve(args.notebooks)
    reports = []
    for i, path in enumerate(paths, 1):
        if not args.json:
            print(f"[{i}/{len(paths)}] {path.name} ...", flush=True)
        report = notebooks.execute(
            path, profile=args.profile, write=args.write, compare=args.compare
        )
        reports.append(report)
        if not args.json:
            status = "ok" if report.ok else "FAILED"
            memory = f", peak {report.peak_pss_mib:.0f} MiB" if report.peak_pss_mib else ""
            print(
                f"      {report.seconds:.1f} s, {report.verdicts} verdicts{memory}, {status}",
                flush=True,
            )
    if args.write:
        _refresh_course_map(reports, args.profile)
    if args.json:
        print(json.dumps([r.as_dict() for r in reports], indent=1))
    else:
        print(notebooks.format_table(reports))
    return 0 if all(r.ok for r in reports) else 1


def _refresh_course_map(reports, profile: str | None) -> None:
    """Record the measured times and redraw the README's course map from the notebooks."""
    from .core import profiles
    from .course import course_map, notebook_files

    name = profile or profiles.current().name
    seconds = {r.notebook: r.seconds for r in reports if r.ok}
    course_map.record_timings(notebook_files.NOTEBOOK_DIR, name, seconds)
    readme = notebook_files.NOTEBOOK_DIR.parent / "README.md"
    if readme.exists():
        course_map.update_readme(readme, notebook_files.NOTEBOOK_DIR)


def sweep_command(args) -> int:
    from .sgd import sweep

    return sweep.cli(args)


def grade_command(args) -> int:
    from .course import grade

    return grade.cli(args)


def release_command(args) -> int:
    from .course.release import release

    print(release(args.directory).summary())
    return 0


def plan_command(args) -> int:
    from .mesh import plan_cli

    return plan_cli.run(args)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole parser; `command` (argv's first word) names the one whose arguments are
    built, since finding the benchmarks imports every chapter and grade's imports nbformat
    (whose jsonschema compiles 38 grammars): 2-3 s that `doctor` and `data` need not pay."""
    parser = argparse.ArgumentParser(prog="python -m course_utils", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    doc = sub.add_parser("doctor", help="check the installation, backends, GPUs, profile, data")
    doc.add_argument("--json", action="store_true", help="print one JSON object")

    b = sub.add_parser("bench", help="run a benchmark and print its figures")
    if command in (None, "bench"):
        _add_benchmarks(b)

    d = sub.add_parser("data", help="prepare a dataset in data/ (cifar10 downloads 163 MB)")
    d.add_argument("dataset", choices=["mnist1d", "cifar10"])

    s = sub.add_parser("sweep", help="run a parallel hyperparameter search from a JSON config")
    s.add_argument(
        "config",
        help="JSON file (# comments, trailing commas allowed): algorithm, parameters, spec, ...",
    )
    s.add_argument("-j", "--jobs", type=int, default=2, help="trials at a time")
    s.add_argument("--json", action="store_true", help="print the trials and the best as JSON")

    from .mesh import plan_cli

    plan_cli.add_arguments(sub.add_parser("plan", help=plan_cli.HELP))

    r = sub.add_parser("run", help="execute notebooks headless and report on each")
    r.add_argument("notebooks", nargs="*", help="paths, names or numbers; default: all, in order")
    r.add_argument("--profile", choices=["cpu", "gpu"], default=None)
    r.add_argument("--write", action="store_true", help="store the executed notebooks")
    r.add_argument("--json", action="store_true", help="print the table as JSON")
    r.add_argument(
        "--compare",
        action="store_true",
        help="fail if a cell not marked NBVAL_IGNORE_OUTPUT shows something other than before",
    )
    g = sub.add_parser("grade", help="run every exercise's checker and print a grade")
    if command in (None, "grade"):
        from .course.grade import add_arguments

        add_arguments(g)
    rel = sub.add_parser(
        "release", help="write a copy for learners: no solutions, exercises cleared"
    )
    rel.add_argument("directory", help="a new or empty folder outside the repository")
    return parser


def _add_benchmarks(bench_parser) -> None:
    from .course import benchmarks

    bsub = bench_parser.add_subparsers(dest="bench", required=True)
    for name, module in benchmarks.modules().items():
        p = bsub.add_parser(name, help=module.HELP)
        module.add_arguments(p)
        p.add_argument("--json", action="store_true", help="print one JSON object")
        p.set_defaults(bench_module=module)


def main(argv: list[str] | None = None) -> int:
    from .ranks.start_method import NativeWindows, refuse_native_windows

    try:  # before the parser imports the chapters, some of which are POSIX-only
        refuse_native_windows()
    except NativeWindows as exc:
        print(f"python -m course_utils: {exc}", file=sys.stderr)
        return 1
    argv = sys.argv[1:] if argv is None else argv
    command = next((word for word in argv if not word.startswith("-")), None)
    parser = build_parser(command)
    args = parser.parse_args(argv)
    handlers = {
        "doctor": doctor,
        "bench": bench,
        "data": data_command,
        "run": run_notebooks,
        "sweep": sweep_command,
        "plan": plan_command,
        "grade": grade_command,
        "release": release_command,
    }
    try:
        return handlers[args.command](args)
    except (CourseError, ValueError) as exc:  # said for the learner: one message, no traceback
        print(f"{parser.prog} {args.command}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
