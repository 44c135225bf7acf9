"""The report's opening paragraph in plain words: what was published from which table, which
columns an adversary may know (the quasi-identifiers) and which must stay hidden (the sensitive
column), what an adversary who knows a person's quasi-identifiers can and cannot learn, with the
figures, and whether every check passed. Only column names and figures: never a cell value."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from privpub.tasks.figures import as_number, fmt, input_rows

# the report's meta keys this module reads besides the release's own (flows/pipeline.py, flows/reverify.py)
SPEC_KEYS = ("quasi_identifiers", "sensitive", "input_name")


def spec_facts(spec: Any) -> dict[str, Any]:
    """meta["quasi_identifiers"], meta["sensitive"] and meta["input_name"] from a ReleaseSpec."""
    from privpub.schemas.input import FRAME_INPUT  # only the flows call this (pandera stays out of the report)

    ds = spec.dataset
    if ds.input == FRAME_INPUT:
        name = "a DataFrame passed from Python"
    elif ds.input:
        name = Path(ds.input).name or str(ds.input)
    else:
        file, _, table = str(ds.table).rpartition(":")
        name = f"table {table} of {Path(file).name}"
    return {"quasi_identifiers": list(ds.qi_names), "sensitive": ds.sensitive, "input_name": name}


def names(columns: Any) -> str:
    """Column names as a person reads them: a, b and c."""
    cols = [columns] if isinstance(columns, str) else [str(c) for c in columns or []]
    return cols[0] if len(cols) == 1 else ", ".join(cols[:-1]) + " and " + cols[-1] if cols else ""


def _find(privacy: list, model: str) -> Any:
    return next((r for r in privacy if r.model == model), None)


def _technique_words(meta: dict[str, Any], privacy: list, sensitive: str) -> str:
    """What an adversary who knows a person's quasi-identifiers can and cannot learn, in the
    technique's own terms, with its figures."""
    tech, params = meta.get("technique", ""), meta.get("parameters") or {}
    s = sensitive or "sensitive"
    gen: list[str] = []  # ranges, k, QIDs, l: one sentence
    out: list[str] = []
    if tech in ("generalization", "butterfly", "union-qid", "serial"):
        gen.append(
            "Each quasi-identifier is published as a range (such as [30, 39]) or a set of values ({a, b}) "
            "instead of its exact value"
        )
    k = _find(privacy, "k-anonymity")
    if k is not None:
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
    if tech == "anatomy" and (_find(privacy, "people per group") is not None):  # rows_per_person = "many"
        lv, ad = _find(privacy, "l-diversity (distinct)"), _find(privacy, "attribute disclosure")
        out.append(
            "The quasi-identifiers are published exactly as they are (table QIT), so an adversary who knows them "
            f"can find a person's rows and their group (all of a person's rows are in one); the {s} values are "
            "published only per group, as counts of the people holding each (table ST), never of records"
            + (f": each group holds {fmt(lv.value)} or more values" if lv else "")
            + (f", and at most {fmt(ad.value)} of its people hold any one of them" if ad else "")
        )
    elif tech == "anatomy":
        lv, ad = _find(privacy, "l-diversity (distinct)"), _find(privacy, "attribute disclosure")
        out.append(
            "The quasi-identifiers are published exactly as they are (table QIT), so an adversary who knows them "
            f"can find a person's row and group; the {s} values are published only per group, as counts (table ST)"
            + (f": they learn only that the person's value is one of {fmt(lv.value)} or more values" if lv else "")
            + (f", guessed right with probability at most {fmt(ad.value)}" if ad else "")
        )
    if tech == "muco":
        dp = _find(privacy, "delta-probability")
        delta = as_number(params.get("delta"))
        cover = f"at least {math.ceil(1 / delta - 1e-9)} records" if delta else "several records"
        out.append(
            "Every record is published with its quasi-identifiers perturbed within its group (MuCo): a published "
            f"value stands for {cover}"
            + (
                f", so no published value can be tied to one original record with probability above "
                f"{fmt(dp.threshold)} (delta-probability {fmt(dp.value)})"
                if dp
                else ""
            )
            + f"; the {s} values are published as they are"
        )
    if tech in ("ambiguity", "priview"):
        where = (
            "each quasi-identifier's values unchanged in a table of its own (AT_<column>), not their combinations"
            if tech == "ambiguity"
            else "all quasi-identifiers but one unchanged (table AT), the last beside the sensitive values (ST)"
        )
        al, be = _find(privacy, "alpha-presence"), _find(privacy, "beta-association")
        out.append(
            f"The release publishes {where}, and the {s} values only per group (table ST)"
            + (
                f": the probability of telling that a person is in the data at all is at most {fmt(al.threshold)} "
                f"(alpha-presence {fmt(al.value)})"
                if al
                else ""
            )
            + (
                f", and of naming their {s} value at most {fmt(be.threshold)} (beta-association {fmt(be.value)})"
                if be
                else ""
            )
        )
    if tech == "serial":
        gl, lo = _find(privacy, "serial-global"), _find(privacy, "serial-localized")
        out.append(
            f"The release is one of a series in which people return and their {s} values may change"
            + (
                f": with every release of the series combined, the probability of linking a person to a value of {s} "
                f"is at most {fmt(gl.threshold)} (serial-global {fmt(gl.value)})"
                if gl
                else ""
            )
            + (f"; within this release no value holds more than {fmt(lo.threshold)} of a group" if lo else "")
        )
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
        out.append(f"{what} ({name}) is {shown}")
    return ("Risk figures: " + "; ".join(out) + ".") if out else ""


def _checks_words(privacy: list) -> str:
    if not privacy:
        return "No privacy check result is recorded for this report."
    failed = [r.model for r in privacy if not r.passed]
    if not failed:
        return f"Every privacy check passed ({len(privacy)} checks)."
    return (
        f"Not every check passed: {len(failed)} of {len(privacy)} failed ({names(failed)}); "
        "the warnings below say why the release was published anyway."
    )


def verdict_paragraph(meta: dict[str, Any], privacy: list, utility: dict[str, Any]) -> str:
    """The report's first paragraph (plain text). Keys missing from an older meta: it says less."""
    sensitive = names(meta.get("sensitive"))
    rows_in, suppressed = meta.get("rows_in"), int(utility.get("suppressed_rows") or 0)
    dropped = int(utility.get("dropped_rows") or 0)  # rows_in counts the rows kept after these
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
    parts += [_technique_words(meta, privacy, sensitive), _risk_words(meta, sensitive), _checks_words(privacy)]
    return " ".join(p for p in parts if p)
