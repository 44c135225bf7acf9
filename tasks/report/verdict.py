"""The report's opening paragraph in plain words: what was published from which table, which
columns an adversary may know (the quasi-identifiers) and which must stay hidden (the sensitive
column), what an adversary who knows a person's quasi-identifiers can and cannot learn, with the
figures, the worst attribute disclosure (a group where a sensitive value is more frequent than in
the whole table) and which model guards the sensitive column, and whether every check passed.
Column names, figures and the sensitive value of the worst case (a category the release
publishes): never a person or a quasi-identifier's cell."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from privpub.schemas.figure_names import current_names
from privpub.schemas.spec import FRAME_INPUT
from privpub.tasks.core.types import PrivacyResult
from privpub.tasks.report.figures import as_number, fmt, input_rows, label, plural

# the report's meta keys this module reads besides the release's own (flows/pipeline.py, flows/reverify.py)
SPEC_KEYS = ("quasi_identifiers", "sensitive", "input_name", "risk_limits")

# Attribute disclosure is shown as a warning (red) when the worst group more than doubles a
# value's share of the whole table (attribute-gain-max above 1) AND raises it by more than 5
# percentage points (attribute-difference-max above 0.05); `[risk] max_gain` / `max_difference`
# replace either limit (docs/report.md). Both: a rare value tripled from 0.1% to 0.3% is a gain
# of 2 but tells an adversary little; 40% to 46% is 6 points but no doubling.
ALARM_GAIN = 1.0
ALARM_DIFFERENCE = 0.05

# the privacy models that bound what an adversary learns of the sensitive value, by the name
# their result carries (an l of 1 bounds nothing: see _guards)
GUARDS = (
    "l-diversity",
    "l-diversity (distinct)",
    "entropy-l-diversity",
    "recursive-cl-diversity",
    "t-closeness",
    "beta-likeness",
    "attribute disclosure",  # Anatomy's: the largest share of one value in a group
    "beta-association",  # Ambiguity's and PriView's
    "delta-probability",  # MuCo's: a published value stands for several records
    "serial-localized",
    "serial-global",
    "epsilon",  # differential privacy: what one person's presence changes, their sensitive value included
)
_L_MODELS = ("l-diversity", "l-diversity (distinct)", "entropy-l-diversity")


def spec_facts(spec: Any) -> dict[str, Any]:
    """meta["quasi_identifiers"], meta["sensitive"], meta["input_name"] and meta["risk_limits"]
    (the [risk] limits the attribute warning reads) from a ReleaseSpec."""
    ds = spec.dataset
    if ds.input == FRAME_INPUT:
        name = "a DataFrame passed from Python"
    elif ds.input:
        name = Path(ds.input).name or str(ds.input)
    else:
        file, _, table = str(ds.table).rpartition(":")
        name = f"table {table} of {Path(file).name}"
    risk = spec.section("risk")
    limits = {key: risk[key] for key in ("max_gain", "max_difference") if key in risk}
    return {
        "quasi_identifiers": list(ds.qi_names),
        "sensitive": ds.sensitive,
        "input_name": name,
        "risk_limits": limits,
    }


def names(columns: Any) -> str:
    """Column names as a person reads them: a, b and c."""
    cols = [columns] if isinstance(columns, str) else [str(c) for c in columns or []]
    return cols[0] if len(cols) == 1 else ", ".join(cols[:-1]) + " and " + cols[-1] if cols else ""


def _find(privacy: list[PrivacyResult], model: str) -> PrivacyResult | None:
    return next((r for r in privacy if r.model == model), None)


def _technique_words(meta: dict[str, Any], privacy: list[PrivacyResult], sensitive: str) -> str:
    """What an adversary who knows a person's quasi-identifiers can and cannot learn, in the
    technique's own terms (meta["technique_words"]: the technique's `describe`, which the flow
    holding it put there), with the generic figures (k, QIDs, l)."""
    words = meta.get("technique_words") or {}
    params = meta.get("parameters") or {}
    s = sensitive or "sensitive"
    gen: list[str] = [words["published_as"]] if words.get("published_as") else []  # ranges, k, QIDs, l: one sentence
    out: list[str] = list(words.get("sentences") or ())
    k = _find(privacy, "k-anonymity")
    if k is not None and (k.worst or {}).get("measures") == "people":  # rows_per_person = "many"
        gen.append(
            f"every published combination of them is shared by at least {fmt(k.value)} people (k-anonymity, "
            f"{fmt(k.threshold)} required), and all of a person's rows are in one such group: an adversary who "
            "knows one or all of a person's records narrows them down to such a group but cannot tell which of "
            "its people is the person"
        )
    elif k is not None:
        gen.append(
            f"every published combination of them is shared by at least {fmt(k.value)} rows (k-anonymity, "
            f"{fmt(k.threshold)} required): an adversary who knows a person's quasi-identifiers narrows them down "
            "to such a group but cannot tell which of its rows is theirs"
        )
    qids = [r for r in privacy if r.model.startswith("k-anonymity QID")]
    if qids:
        sets = "; ".join(names(q) for q in params.get("qids") or []) or "the spec's QIDs"
        gen.append(
            f"for each QID, a set of columns an adversary may know together ({sets}), every published "
            f"combination is shared by at least {fmt(min(as_number(q.value) or 0 for q in qids))} rows: knowing "
            "one QID of a person narrows them down to that many rows, not to one"
        )
    ld = _find(privacy, "l-diversity")
    if ld is not None:
        gen.append(f"each such group holds at least {fmt(ld.value)} different {s} values (l-diversity)")
    if gen:
        out.insert(0, gen[0] + (", and " + "; ".join(gen[1:]) if len(gen) > 1 else ""))
    if not out and meta.get("risk_note"):
        out.append(str(meta["risk_note"]).rstrip("."))
    return " ".join(_sentence(x) + "." for x in out)


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


def _risk_words(meta: dict[str, Any], sensitive: str) -> str:
    risk = meta.get("risk") or {}
    out = []
    for name, what in (
        ("prosecutor-risk-max", "the highest chance of picking out a person's record"),
        ("attribute-risk-max", f"the highest chance of guessing a person's {sensitive or 'sensitive'} value"),
    ):
        before, after = as_number(risk.get(f"input-{name}")), as_number(risk.get(name))
        if before is None and after is None:
            continue
        shown = f"{fmt(before)} in the input" if before is not None else ""
        shown += (" and " if shown else "") + (
            f"{fmt(after)} as published" if after is not None else "not computed for the release (see the risk note)"
        )
        out.append(f"{what} is {shown}")
    return ("Risk figures: " + "; ".join(out) + ".") if out else ""


def percent(share: float) -> str:
    """A share as a person reads it: 62%, 3.1%, 0.42% (two significant digits below 10%)."""
    value = 100 * share
    return f"{value:.0f}%" if value >= 9.95 else f"{value:.2g}%"


def _worst(meta: dict[str, Any]) -> dict[str, Any] | None:
    """The release's worst attribute disclosure (tasks/risk/__init__.py attribute_summary), if recorded."""
    summary = (meta.get("attribute") or {}).get("release")
    return summary.get("worst") if isinstance(summary, dict) else None


def _unit(meta: dict[str, Any]) -> str:
    return str(((meta.get("attribute") or {}).get("release") or {}).get("counts") or "rows")


def alarm_limits(meta: dict[str, Any]) -> tuple[float, float]:
    """(gain, difference) above which attribute disclosure is a warning: the [risk] limits when
    the spec sets them, else ALARM_GAIN and ALARM_DIFFERENCE."""
    limits = meta.get("risk_limits") or {}
    return float(limits.get("max_gain", ALARM_GAIN)), float(limits.get("max_difference", ALARM_DIFFERENCE))


def attribute_alarm(meta: dict[str, Any]) -> bool:
    """True when the release's attribute-gain-max and attribute-difference-max are both above
    their limits (alarm_limits)."""
    risk = meta.get("risk") or {}
    gain, difference = as_number(risk.get("attribute-gain-max")), as_number(risk.get("attribute-difference-max"))
    if gain is None or difference is None:
        return False
    gain_limit, difference_limit = alarm_limits(meta)
    return gain > gain_limit and difference > difference_limit


def _guards(privacy: list[PrivacyResult]) -> list[PrivacyResult]:
    """The privacy results that bound what is learned of the sensitive value (an l below 2 and a
    t of 1 bound nothing)."""
    out = []
    for r in privacy:
        limit = as_number(r.threshold)
        if r.model not in GUARDS or (r.model in _L_MODELS and (limit or 0) < 2):
            continue
        if r.model == "t-closeness" and (limit or 1) >= 1:
            continue
        out.append(r)
    return out


def _guard_words(privacy: list[PrivacyResult], sensitive: str) -> str:
    """Which model guards the sensitive column, or that none does."""
    guards = _guards(privacy)
    if guards:
        listed = names(
            [f"{label(r.model)} ({fmt(r.threshold)})" if r.threshold is not None else label(r.model) for r in guards]
        )
        return f"What can be learned of {sensitive} is bounded by {listed}."
    why = (
        " (k-anonymity hides which row is a person's, not what the rows of their group hold)"
        if any(r.model.startswith("k-anonymity") or r.model.startswith("k'-anonymity") for r in privacy)
        else ""
    )
    return f"No privacy model of this release bounds what can be learned of {sensitive}{why}."


def attribute_words(meta: dict[str, Any], sensitive: str) -> str:
    """The worst attribute disclosure in words: "In the worst group, 62% have result = positive,
    against 3% of all rows (...)" ("" when not recorded)."""
    worst = _worst(meta)
    if not worst:
        return ""
    unit = _unit(meta)
    risk = meta.get("risk") or {}
    before = as_number(risk.get("input-attribute-gain-max"))
    return (
        f"Attribute disclosure, beyond what everyone knows of {sensitive}: in the worst group, "
        f"{percent(worst['group_share'])} have {sensitive} = {fmt(worst['value'])}, against "
        f"{percent(worst['share'])} of all {unit} ({worst['holding']:,} of the group's {worst['group_size']:,} {unit}; "
        f"{_GAIN} {fmt(risk.get('attribute-gain-max', worst['gain']))}, "
        f"{_RISE} {fmt(risk.get('attribute-difference-max', worst['difference']))}"
        + (f"; in the input, {_GAIN} {fmt(before)}" if before is not None else "")
        + ")."
    )


# the two attribute figures in words: (p_g - p) / p and p_g - p of the worst value
_GAIN = "relative gain"
_RISE = "rise in share"


def alarm_text(meta: dict[str, Any], privacy: list[PrivacyResult]) -> str:
    """The attribute warning the report shows in red ("" when the figures are within
    alarm_limits)."""
    worst = _worst(meta)
    if not attribute_alarm(meta) or not worst:
        return ""
    sensitive = names(meta.get("sensitive")) or "the sensitive column"
    gain_limit, difference_limit = alarm_limits(meta)
    risk = meta.get("risk") or {}
    guarded = bool(_guards(privacy))
    return (
        f"attribute disclosure: in the worst group, {percent(worst['group_share'])} have {sensitive} = "
        f"{fmt(worst['value'])}, against {percent(worst['share'])} of all {_unit(meta)} "
        f"({_GAIN} {fmt(risk['attribute-gain-max'])}, above {fmt(gain_limit)}; {_RISE} "
        f"{fmt(risk['attribute-difference-max'])}, above {fmt(difference_limit)})"
        + ("" if guarded else f"; no privacy model of this release guards {sensitive}")
    )


def _checks_words(privacy: list[PrivacyResult], unguarded_alarm: bool = False, sensitive: str = "") -> str:
    if not privacy:
        return "No privacy check result is recorded for this report."
    failed = [r.model for r in privacy if not r.passed]
    if unguarded_alarm:  # never "every check passed" beside a disclosure nothing guards
        passed = f"{len(privacy) - len(failed)} of {len(privacy)} privacy checks passed"
        return (
            f"Not every check passed: {passed}, but none of them guards {sensitive} against the attribute "
            "disclosure above" + (f" ({names([label(m) for m in failed])} failed)" if failed else "") + "."
        )
    if not failed:
        return f"Every privacy check passed ({plural(len(privacy), 'check')})."
    return (
        f"Not every check passed: {len(failed)} of {len(privacy)} failed ({names([label(m) for m in failed])}); "
        "the warnings below say why the release was published anyway."
    )


def verdict_paragraph(meta: dict[str, Any], privacy: list[PrivacyResult], utility: dict[str, Any]) -> str:
    """The report's first paragraph (plain text). Keys missing from an older meta: it says less."""
    utility = current_names(utility)  # an old state's names read as now
    sensitive = names(meta.get("sensitive"))
    rows_in, suppressed = meta.get("rows_in"), int(utility.get("suppressed-rows") or 0)
    dropped = int(utility.get("dropped-rows") or 0)  # rows_in counts the rows kept after these
    why = [f"{dropped:,} left out for empty cells"] * bool(dropped) + [f"{suppressed:,} suppressed"] * bool(suppressed)
    if isinstance(rows_in, int) and why:
        rows = f"{rows_in - suppressed:,} of the {input_rows(rows_in, utility):,} rows"
    else:
        rows = f"{rows_in:,} rows" if isinstance(rows_in, int) else "rows"
    source = f" of {meta['input_name']}" if meta.get("input_name") else ""
    source += f" ({', '.join(why)})" if isinstance(rows_in, int) and why else ""
    tech = meta.get("technique")
    parts = [
        f"Release {meta.get('release_id', '')} publishes {rows}{source}"
        + (f", anonymized with {tech}" if tech else "")
        + "."
    ]
    if meta.get("quasi_identifiers"):
        parts.append(
            f"Quasi-identifiers, the columns an adversary may already know about a person: "
            f"{names(meta['quasi_identifiers'])}."
        )
    if sensitive:
        parts.append(f"Sensitive column, what must not be learned about them: {sensitive}.")
    parts += [_technique_words(meta, privacy, sensitive), _risk_words(meta, sensitive)]
    if sensitive:
        parts += [attribute_words(meta, sensitive), _guard_words(privacy, sensitive)]
    unguarded = bool(sensitive) and attribute_alarm(meta) and not _guards(privacy)
    parts.append(_checks_words(privacy, unguarded, sensitive))
    return " ".join(p for p in parts if p)
