"""Parameter settings by name, as explore's grid and publish's `--set` / `set=` take them.

A name is a [technique] key (`k`), or `series.KEY` / `risk.KEY`; a CLI value is read as TOML
reads a bare value (`20` an integer, `0.1` a number, `true` a boolean, else text), so a value is
never coerced: the spec check refuses a `1.5` where an integer is wanted. The words of every
refusal name what the caller typed: the CLI's `--set`, or Python's `grid` / `set=`
(attempts.for_caller). Light: imported by the Python API and the CLI's release commands.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from privpub.flows.attempts import for_caller
from privpub.schemas.errors import SpecError, public_message

# the sections a setting may vary: the input, the output, the seed and the run are the spec's
SECTIONS = ("technique", "series", "risk")
_INT = re.compile(r"[+-]?\d+")
_RANGE = re.compile(r"\s*([+-]?\d+)\s*\.\.\s*([+-]?\d+)\s*(?:\.\.\s*([+-]?\d+)\s*)?")
# the most settings one explore computes (a grid or a range above it is refused before any work)
MAX_SETTINGS = 500
_FLOAT = re.compile(r"[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?")


def parse_value(text: str) -> Any:
    """A value as TOML would read it bare: an integer, else a decimal number, else true / false,
    else the text itself (a "2" stays 2 and a "2.0" stays 2.0: the spec check takes no coercion)."""
    if _INT.fullmatch(text):
        return int(text)
    if _FLOAT.fullmatch(text):
        return float(text)
    if text in ("true", "false"):
        return text == "true"
    return text


def parse_values(name: str, text: str) -> list[Any]:
    """A `--set` option's values: a list `0,0.01,0.05` (each read by `parse_value`) or an integer
    range `5..50` / `5..50..5` (both ends included; step 1 by default). An empty range, a step
    below 1 or a range of more than MAX_SETTINGS values is refused in one line naming it."""
    if ".." not in text:
        return [parse_value(v.strip()) for v in text.split(",")]
    m = _RANGE.fullmatch(text)
    if m is None:
        raise SpecError(f"--set {name}={text}: a range is two integers START..END, optionally ..STEP, e.g. 5..50..5")
    start, end, step = int(m[1]), int(m[2]), int(m[3]) if m[3] is not None else 1
    if step < 1:
        raise SpecError(f"--set {name}={text}: a range's step must be an integer >= 1, got {step}")
    if end < start:
        raise SpecError(f"--set {name}={text}: empty range ({end} < {start}); write START..END with START <= END")
    count = (end - start) // step + 1
    if count > MAX_SETTINGS:
        raise SpecError(
            f"--set {name}={text}: {count:,} values, more than the {MAX_SETTINGS} settings one explore computes; "
            "take a larger step"
        )
    return list(range(start, end + 1, step))


def where(name: str, python: str = "grid") -> tuple[str, str]:
    """(section, key) of a setting's name: `k` is [technique] k, `risk.threshold` [risk] threshold.
    `python`: the Python parameter the name came in (the CLI's is `--set`)."""
    section, dot, key = name.rpartition(".") if isinstance(name, str) else ("", "", "")
    section = section if dot else "technique"
    if section not in SECTIONS or not key:
        given = for_caller(f"--set {name}", f"{python} key {name!r}")
        raise SpecError(
            f"{given}: settings are keys of [technique] (plain names), [series] and [risk] "
            "(series.KEY, risk.KEY); the input, output, seed and run are the spec's"
        )
    return section, key


def as_overrides(values: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """{name: value} as resolve_spec overrides: {"k": 20, "risk.threshold": 0.1} ->
    {"technique": {"k": 20}, "risk": {"threshold": 0.1}} (names checked by `where`)."""
    out: dict[str, dict[str, Any]] = {}
    for name, value in values.items():
        section, key = where(name, "set")
        out.setdefault(section, {})[key] = value
    return out


def parse_publish_sets(items: Sequence[str]) -> dict[str, Any]:
    """publish's `--set NAME=VALUE` options as {name: value}: one value each (a list of values is
    explore's grid), each name once, every name one explore takes. One line naming the option."""
    values: dict[str, Any] = {}
    for item in items:
        name, sep, text = item.partition("=")
        name, text = name.strip(), text.strip()
        if not sep or not name or not text:
            raise SpecError(f"--set {item}: expected NAME=VALUE, e.g. --set k=20")
        if "," in text or ".." in text:
            raise SpecError(
                f"--set {item}: publish takes one value per name (a list or range of values is explore's grid)"
            )
        if name in values:
            raise SpecError(f"--set {name}: given twice")
        where(name)
        values[name] = parse_value(text)
    return values


def checked_set(values: Any) -> dict[str, Any]:
    """Python's `set=` as {name: value}: a dict whose names explore takes."""
    if not isinstance(values, Mapping):
        raise SpecError(f'set must be a dict of name -> value, e.g. set={{"k": 20}}, not {type(values).__name__}')
    for name in values:
        if not isinstance(name, str):
            raise SpecError(f"set key {name!r}: names are text, e.g. set={{'k': 20}}")
        where(name, "set")
    return dict(values)


def set_refusal(exc: Exception, values: Mapping[str, Any]) -> Exception:
    """A spec refusal caused by a set value, prefixed with the value as the caller gave it
    (`--set k=abc: [technique] k must be an integer >= 1, got 'abc'`); any other as it is."""
    if not isinstance(exc, SpecError):
        return exc
    message = public_message(exc)
    for name, value in values.items():
        section, key = where(name, "set")
        if re.match(rf"\[{section}\] {re.escape(key)}\b", message):
            text = str(value).lower() if isinstance(value, bool) else value  # as typed: true, not True
            given = for_caller(f"--set {name}={text}", f"set={{{name!r}: {value!r}}}")
            named = SpecError(f"{given}: {message}")
            named.__cause__ = exc
            return named
    return exc
