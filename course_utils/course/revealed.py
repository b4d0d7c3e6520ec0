"""Whether a notebook states an exercise's answer before the exercise asks for it.

Each chapter's exercises module may offer `answer_values()`: for each checker, the cases it
tries and the value it expects for each, `{"bubble": [((stages, microbatches), value),
...]}`, computed from the course's own formulas. A cell above the exercise reveals an
answer when its markdown or its stored text output shows one of those values:

- a value shown with three significant digits or more (`0.158`, `178 kB`, `1,000`), read
  at the precision it is printed with, so `0.158` is (K-1)/(M+K-1) for K=4, M=16;
- a shorter value only where it is exact and stated beside every number of its case
  (`with 4 ranks: 16 on every rank`), since on its own a `16` is a batch size as often as
  an answer.

Numbers followed by a unit of time or of rate are measurements, never answers, and are
passed over, as are numbers printed right after the word "measured" (a measured bubble of
0.308 once equalled (K-1)/(M+K-1) for K = 5, M = 9 to the digit shown); `%` and byte units
(kB ... TiB) are read as what they scale to.

A value is not the only way to give an answer away: a formula or a sentence can. So the
module may also offer `answer_phrases()`, `{"bubble": ["(K-1)/(M+K-1)", ...]}`, and a cell
above the exercise reveals one when its text holds the phrase once both are made plain:
case, spaces, `$`, bold and LaTeX's `\\frac{a}{b}`, `\\left`, `\\right` set aside, and `·`, `×`
read as `*`, `−` as `-`.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator
from dataclasses import dataclass

from .exercise_cells import Exercise

CHECKER = re.compile(r"\b(\w+)\.check_(\w+)\s*\(")
NUMBER = re.compile(
    r"(?<![\w.,])(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?(?:[eE]([-+]?\d+))?(?![\w.]*\d)"
    r"(?:\s*(%|[kKMGT]i?B(?![\w/])|B(?![\w/])))?"
)
MEASURED_BEFORE = re.compile(r"\bmeasured:?\s*$")
MEASURED = re.compile(r"\s*(ms|s|µs|us|ns|min|h|x|×|[kMG]?B/s|[kMG]bit/s|it/s|Hz)\b")
SCALES = {"%": 0.01, "B": 1, "kB": 1e3, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
          "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}  # fmt: skip
DISTINCT_DIGITS = 3  # a value shown with this many significant digits counts on its own
NEAR = 80  # characters either side in which a short value's case must be stated
FRAC = re.compile(r"\\frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}")
SAME = str.maketrans({"−": "-", "–": "-", "·": "*", "×": "*", "⋅": "*", "’": "'"})
PROMPT = re.compile(r"^(?:#+\s*Exercises?\b|\*\*\d+\.|\d+\.\s+\*\*)", re.MULTILINE | re.IGNORECASE)
DROP = re.compile(r"\\left|\\right|\\[,;!]|\*\*|[\s$`]")


@dataclass(frozen=True)
class Number:
    start: int
    text: str
    value: float
    half_step: float  # half the last shown digit, in the units of `value`
    digits: int  # significant digits shown


@dataclass(frozen=True)
class Leak:
    cell: int
    where: str  # "markdown" or the output's type
    shown: str  # the number as the cell shows it
    value: float  # the answer it equals
    case: tuple
    context: str

    def __str__(self) -> str:
        return (
            f"cell {self.cell} ({self.where}) shows {self.shown!r}, the answer {self.value:g} "
            f"for the case {self.case}: ...{self.context}..."
        )


@dataclass(frozen=True)
class Said:
    cell: int
    where: str
    phrase: str
    context: str

    def __str__(self) -> str:
        return f"cell {self.cell} ({self.where}) says {self.phrase!r}: ...{self.context}..."


def numbers(text: str) -> Iterator[Number]:
    """The numbers in `text` that could state a count, a fraction or a size of bytes."""
    for match in NUMBER.finditer(text):
        if MEASURED.match(text, match.end()) or MEASURED_BEFORE.search(text, 0, match.start()):
            continue
        whole, fraction, exponent, unit = match.groups()
        whole, fraction, exponent = whole.replace(",", ""), fraction or "", int(exponent or 0)
        scale = SCALES.get(unit, 1)
        value = float(f"{whole}.{fraction or 0}e{exponent}") * scale
        half = 0.5 * 10.0 ** (exponent - len(fraction)) * scale
        digits = len((whole + fraction).lstrip("0"))
        yield Number(match.start(), match.group().strip(), value, half, digits)


def texts(cell) -> Iterator[tuple[str, str]]:
    """(where, text) for a cell's markdown and each of its stored text outputs."""
    if cell.cell_type == "markdown":
        yield "markdown", cell.source
    for output in cell.get("outputs", []):
        if output.output_type == "stream":
            yield "stream", output.text
        elif output.output_type == "error":  # its message: the traceback repeats the
            yield "error", output.evalue  # cell's code, line numbers and In[n] included
        else:
            for mime, data in output.get("data", {}).items():
                if mime.startswith("text/"):
                    yield mime, data if isinstance(data, str) else "".join(data)


def _listing(source: str, name: str):
    """What the chapter's `name()` lists for the checker an exercise cell calls, or None."""
    calls = CHECKER.findall(source)
    if not calls:
        return None
    chapter, check = calls[-1]
    checker = getattr(importlib.import_module(f"course_utils.{chapter}"), f"check_{check}")
    listing = getattr(importlib.import_module(checker.__module__), name, None)
    return listing().get(check) if listing else None


def answers_for(source: str) -> list[tuple[tuple, float]] | None:
    """The cases and expected values of the checker an exercise cell calls, from its chapter's
    `answer_values()`; None when the chapter lists none for that checker."""
    return _listing(source, "answer_values")


def phrases_for(source: str) -> list[str] | None:
    """The formulas and sentences that would give away the answer of the checker an exercise
    cell calls, from its chapter's `answer_phrases()`; None when it lists none."""
    return _listing(source, "answer_phrases")


def plain(text: str) -> str:
    """`text` with what does not change a formula's or a sentence's meaning set aside."""
    return DROP.sub("", FRAC.sub(r"(\1)/(\2)", text.translate(SAME))).lower()


def said(nb, exercise: Exercise, phrases: list[str]) -> list[Said]:
    """Every place above `exercise` where a cell's text holds one of its `phrases`, the
    exercise's own statement aside (it may define what the learner writes)."""
    prompt = max(
        (i for i in range(exercise.index) if nb.cells[i].cell_type == "markdown"), default=-1
    )
    found = []
    for index in range(exercise.index):
        for where, text in texts(nb.cells[index]):
            if index == prompt and where == "markdown":
                starts = list(PROMPT.finditer(text))
                text = text[: starts[-1].start()] if starts else ""
            flat = plain(text)
            for phrase in phrases:
                at = flat.find(plain(phrase))
                if at >= 0:
                    found.append(Said(index, where, phrase, flat[max(0, at - 40) : at + 80]))
    return found


def leaks(nb, exercise: Exercise, answers: list[tuple[tuple, float]]) -> list[Leak]:
    """Every place above `exercise` where a cell shows one of its `answers`."""
    found = []
    for index in range(exercise.index):
        for where, text in texts(nb.cells[index]):
            shown = list(numbers(text))
            for number in shown:
                for case, value in answers:
                    if _states(number, shown, case, value):
                        context = text[max(0, number.start - 50) : number.start + 50]
                        found.append(
                            Leak(index, where, number.text, value, case, " ".join(context.split()))
                        )
    return found


def _states(number: Number, shown: list[Number], case: tuple, value: float) -> bool:
    if abs(number.value - value) > number.half_step * (1 + 1e-9):
        return False
    if number.digits >= DISTINCT_DIGITS:
        return True
    if abs(number.value - value) > 1e-9 * abs(value):
        return False
    inputs = [x for x in case if isinstance(x, int | float) and not isinstance(x, bool)]
    near = {n.value for n in shown if n is not number and abs(n.start - number.start) <= NEAR}
    return bool(inputs) and all(float(x) in near for x in inputs)
