"""The words a compliance officer reads beside the numbers (report.html, the Prefect summary):
what each utility figure measures, its unit and its verdict against stated bands, what each
privacy figure guarantees, and a verifier's worst case as readable cells (docs/report.md)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from fractions import Fraction
from typing import Any, NamedTuple

import numpy as np

from privpub.schemas.figure_names import current_name, current_names

LOWER, HIGHER, NEUTRAL = "lower is better", "higher is better", "context"
LONG_LIST = 12  # a list of more values is shown as "N values: the first few, ..."
SHOWN = 6  # values shown of a long list


def readable(value: Any, digits: int = 4) -> str:
    """A number as a person reads it: at most `digits` significant digits, thousands separated,
    no e-notation and no trailing zeros (19394.2 -> "19,390", 3.96624 -> "3.966", 0.000412 ->
    "0.000412"); below 0.0001 "3.75 × 10^-5". Integers too: a figure of 123,456 rows reads
    123,500 (the exact value stays in the state's figures and the JSON)."""
    x = float(value)
    if not math.isfinite(x):
        return str(value)
    if x == 0:
        return "0"
    rounded = float(f"{x:.{digits}g}")
    size = abs(rounded)
    if size < 1e-4:  # 3.75 × 10^-5, never a row of zeros to count
        mantissa, power = f"{rounded:.{digits - 1}e}".split("e")
        return f"{_trim(mantissa)} × 10^{int(power)}"
    decimals = max(digits - 1 - math.floor(math.log10(size)), 0)
    return _trim(f"{rounded:,.{decimals}f}")


def _trim(text: str) -> str:
    return text.rstrip("0").rstrip(".") if "." in text else text


def fmt(value: Any, digits: int = 4) -> str:
    """A figure with at most `digits` significant digits (`readable`); integers as they are (a
    count, a seed, a published code); nothing (not "nan" / "None") for a missing figure."""
    if value is None or (isinstance(value, (float, np.floating)) and math.isnan(float(value))):
        return ""
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (float, np.floating)):
        return readable(value, digits)
    return str(value)


def plural(count: int, word: str, many: str | None = None) -> str:
    """ "1 check", "2 checks" (`many`: an irregular plural)."""
    return f"{count:,} {word if count == 1 else many or word + 's'}"


def as_number(value: Any) -> float | None:
    """A figure as a float ("1/3" too), or None when it is not a finite number."""
    if isinstance(value, (bool, np.bool_)) or value is None:
        return None
    try:
        number = float(Fraction(str(value).strip())) if "/" in str(value) else float(value)
    except (TypeError, ValueError, ZeroDivisionError):
        return None
    return number if math.isfinite(number) else None


# --- utility figures ---------------------------------------------------------------------------


class Band(NamedTuple):
    """Verdict bands of a figure where lower is better: good below `good`, fair below `fair`,
    else poor; `of_rows`: the figure is a count of rows, judged as a share of the input rows;
    `per_row`: a sum over published rows, judged per row."""

    good: float
    fair: float
    of_rows: bool = False
    per_row: bool = False


QUERY_BAND = Band(0.05, 0.20)  # mean relative error of count queries
WIDTH_BAND = Band(0.10, 0.30)  # share of a column's domain a published cell spans
ROWS_BAND = Band(0.01, 0.05, of_rows=True)  # share of the input rows left out
PER_ROW_BAND = Band(0.10, 0.30, per_row=True)  # penalty-<column>: its width per published row


class Figure(NamedTuple):
    label: str  # what a person calls it
    unit: str
    what: str  # what it measures, in words
    better: str
    band: Band | None = None


_FIGURES: dict[str, Figure] = {
    "queries": Figure(
        "count queries asked", "queries", "count queries in the shared workload (the same for every technique)", NEUTRAL
    ),
    "groups": Figure(
        "QI-groups", "groups", "QI-groups published: people an adversary cannot tell apart share one", NEUTRAL
    ),
    "avg-group-size": Figure("average group size", "rows", "average rows per QI-group", LOWER),
    "min-group-size": Figure(
        "smallest group", "rows", "smallest QI-group (at least k when k-anonymity is asked for)", NEUTRAL
    ),
    "max-group-size": Figure("largest group", "rows", "largest QI-group: large groups blur the data most", LOWER),
    "discernibility": Figure(
        "discernibility",
        "rows²",
        "each row is charged the size of its group, so large groups cost more (the sum of the squared group "
        "sizes; the discernibility metric of Bayardo and Agrawal, 2005)",
        LOWER,
    ),
    "gen-iloss": Figure(
        "generalization loss (GenILoss)",
        "share of domain, 0-1",
        "average width of a published QI cell as a share of its column's domain (a suppressed cell counts 1): "
        "0 = exact values, 1 = every cell the whole domain (docs/utility.md)",
        LOWER,
        WIDTH_BAND,
    ),
    "non-uniform-entropy": Figure(
        "non-uniform entropy",
        "bits",
        "bits an analyst lacks to recover each original QI value from its published cell, summed over cells "
        "(0 = exact values; docs/utility.md)",
        LOWER,
    ),
    "aecs": Figure(
        "average class size / k (AECS)",
        "ratio, 1 = ideal",
        "published rows over classes times k: 1 when every class holds exactly k rows, larger when classes are "
        "larger than privacy needs (docs/utility.md)",
        LOWER,
    ),
    "precision": Figure(
        "precision (Sweeney)",
        "0-1",
        "1 minus the average generalization height of a QI cell over its hierarchy's height (the cell's width "
        "without a hierarchy): 1 = exact values (docs/utility.md)",
        HIGHER,
    ),
    "kl-divergence": Figure(
        "KL divergence",
        "bits",
        "how far the release, read as uniform within each published box, is from the input's joint distribution "
        "of the QIs and the sensitive column (0 = the same; docs/utility.md)",
        LOWER,
    ),
    "classification-accuracy": Figure(
        "classification accuracy (release)",
        "share of held-out rows, 0-1",
        "share of the held-out input rows whose [evaluate] target a random forest trained on the release "
        "predicts exactly (docs/utility.md)",
        HIGHER,
    ),
    "input-classification-accuracy": Figure(
        "classification accuracy (input)",
        "share of held-out rows, 0-1",
        "the same model trained on the input's rows the release was made from, tested on the same held-out rows",
        HIGHER,
    ),
    "held-out-people": Figure(
        "held-out people",
        "people",
        "people drawn from the input before anonymizing to test the classification, never published",
        NEUTRAL,
    ),
    "held-out-rows": Figure("held-out rows", "rows", "the held-out people's input rows", NEUTRAL),
    "suppressed-rows": Figure(
        "suppressed rows",
        "rows",
        "input rows left out of the release (judged as a share of the input)",
        LOWER,
        ROWS_BAND,
    ),
    "dropped-rows": Figure(
        "dropped rows",
        "rows",
        'input rows with an empty cell, left out before any work ([dataset] missing = "drop")',
        LOWER,
        ROWS_BAND,
    ),
    "uncertainty-penalty": Figure(
        "uncertainty penalty (total)",
        "cells × share of domain",
        "sum over published cells of the cell's width as a share of its column's range: 0 for an exact value, "
        "1 for the whole range (as the Butterfly paper defines it)",
        LOWER,
    ),
    "uncertainty-penalty-normalized": Figure(
        "uncertainty penalty per cell",
        "share of domain, 0-1",
        "average width of a published QI cell as a share of its column's range: 0 = exact values, 1 = whole domain",
        LOWER,
        WIDTH_BAND,
    ),
    "uncertainty-penalty-common": Figure(
        "uncertainty penalty, shared columns",
        "cells × share of domain",
        "the uncertainty penalty on columns that belong to several QIDs",
        LOWER,
    ),
    "uncertainty-penalty-distinct": Figure(
        "uncertainty penalty, single-QID columns",
        "cells × share of domain",
        "the uncertainty penalty on columns of one QID only",
        LOWER,
    ),
    "iloss": Figure(
        "information loss (ILoss)",
        "share of the largest distance, 0-1",
        "average distance between a QI value and its perturbed published value, over the column's largest "
        "distance (as the MuCo paper defines it): 0 = unchanged",
        LOWER,
        WIDTH_BAND,
    ),
}


def figure_words(name: str) -> Figure:
    """Label, unit, meaning, direction and bands of a utility figure (a plain fallback for one
    this module does not know)."""
    name = current_name(name)  # an old state's names read as now
    m = re.fullmatch(r"query-error-(\d+)pct", name)
    if m:
        return Figure(
            f"count-query error at {m.group(1)}% selectivity",
            "relative error (0 = exact)",
            f"mean relative error of count queries selecting about {m.group(1)}% of the rows (0 = exact answers)",
            LOWER,
            QUERY_BAND,
        )
    if name.startswith("penalty-"):
        col = name.removeprefix("penalty-")
        return Figure(
            f"uncertainty penalty on {col}",
            "rows × share of domain",
            f"sum over published rows of the {col} cell's width as a share of {col}'s range "
            "(part of the uncertainty penalty; judged per row)",
            LOWER,
            PER_ROW_BAND,
        )
    return _FIGURES.get(name, Figure(name.replace("_", " "), "", "technique-specific figure", NEUTRAL))


def describe(name: str) -> tuple[str, str]:
    """(what the figure measures, which direction is better)."""
    name = current_name(name)  # an old state's names read as now
    words = figure_words(name)
    return words.what, words.better


def band_text(band: Band, pct: bool) -> tuple[str, str]:
    """The good and fair limits as a person reads them (5%, or 0.1)."""
    return (f"{band.good:.0%}", f"{band.fair:.0%}") if pct else (f"{band.good:g}", f"{band.fair:g}")


def input_rows(rows_in: Any, utility: dict[str, Any]) -> int | None:
    """The rows of the input as read: a release's `rows_in` counts the rows that entered it, after
    those `[dataset] missing = "drop"` left out (utility `dropped-rows`), so a share of "the input
    rows" divides by both together. None without `rows_in`."""
    utility = current_names(utility)  # an old state's names read as now
    if not isinstance(rows_in, (int, np.integer)) or isinstance(rows_in, (bool, np.bool_)):
        return None
    return int(rows_in) + int(utility.get("dropped-rows") or 0)


def verdict(name: str, value: Any, rows_in: int | None = None, published_rows: int | None = None) -> str:
    """ "good", "fair" or "poor" with the band it falls in, or "" where no verdict makes sense
    (a count of groups, a figure without bands, a share without its denominator). `rows_in`: the
    rows read (`input_rows`), the denominator of a share of the input."""
    name = current_name(name)  # an old state's names read as now
    band = figure_words(name).band
    number = as_number(value)
    if band is None or number is None:
        return ""
    pct = band.of_rows or name.startswith("query-error-")
    if band.of_rows:
        if not rows_in:
            return ""
        number /= rows_in
    if band.per_row:
        if not published_rows:
            return ""
        number /= published_rows
    good, fair = band_text(band, pct)
    shown = f"{number:.1%}" if pct else f"{number:.3g}"
    per = " per row" if band.per_row else (" of the input rows" if band.of_rows else "")
    if number < band.good:
        return f"good ({shown}{per}; under {good})"
    if number < band.fair:
        return f"fair ({shown}{per}; {good} to {fair})"
    return f"poor ({shown}{per}; {fair} or more)"


def poor_figures(utility: dict[str, Any], rows_in: int | None = None) -> list[str]:
    """Warning lines for figures that make the release of little use (`rows_in`: the rows read)."""
    utility = current_names(utility)  # an old state's names read as now
    out = []
    for name, value in utility.items():
        m = re.fullmatch(r"query-error-(\d+)pct", name)
        if m and isinstance(value, (int, float)) and value > 1:
            out.append(
                f"count queries at {m.group(1)}% selectivity are off by {value:.2f} times their "
                "true answer on average (above 1: analysts will get little from them)"
            )
    penalty = utility.get("uncertainty-penalty-normalized")
    if isinstance(penalty, (int, float)) and penalty > 0.5:
        out.append(f"cells are generalized over {penalty:.0%} of their domain on average")
    suppressed = utility.get("suppressed-rows")
    if rows_in and isinstance(suppressed, (int, float)) and suppressed > 0.05 * rows_in:
        out.append(f"{int(suppressed):,} of {rows_in:,} input rows ({suppressed / rows_in:.0%}) were left out")
    return out


# --- privacy figures ---------------------------------------------------------------------------

_GUARANTEES: list[tuple[str, str]] = [
    (
        r"epsilon",
        "differential privacy with epsilon {t}: whatever anyone concludes from the published tables, its chance "
        "changes by at most a factor e^{t} whether or not any one person's rows were in the data (docs/dp.md)",
    ),
    (
        r"series-epsilon",
        "the releases of the series together spend at most epsilon = {t} (basic sequential composition: "
        "the releases' epsilons add up): whatever all of them are combined with, one person's presence or "
        "absence changes the chance of any conclusion by a factor of at most e^{t}",
    ),
    (r"series-delta", "the releases' deltas add up to at most {t}, the chance that the epsilon bound fails"),
    (
        r"k-anonymity",
        "every published combination of quasi-identifier values is shared by at least {t} rows: an adversary "
        "who knows a person's quasi-identifiers finds at least {t} rows that may be theirs",
    ),
    (
        r"k-anonymity QID(\d+)",
        "for QID {1} (columns an adversary may know together), every published combination of its values is "
        "shared by at least {t} rows",
    ),
    (
        r"k'-anonymity union QID",
        "over the columns of all QIDs together, every published combination is shared by at least {t} rows",
    ),
    (
        r"l-diversity( \(distinct\))?",
        "every group holds at least {t} different sensitive values: knowing a person's group leaves at least "
        "{t} possible values",
    ),
    (
        r"entropy-l-diversity",
        "the sensitive values of every class are at least as spread out as {t} equally frequent values "
        "(exp of their entropy)",
    ),
    (
        r"recursive-cl-diversity",
        "in every class the most frequent sensitive value is rarer than c times the less frequent ones "
        "together ({t}): no value dominates a class",
    ),
    (
        r"t-closeness",
        "in every class the sensitive values are distributed within distance {t} of the whole table's: a class "
        "tells little more than the table as a whole",
    ),
    (
        r"beta-likeness",
        "in every class each sensitive value's share exceeds its share of the whole table by at most {t} times "
        "that share ((p - q) / q at most {t}): a class never makes a rare value much more likely",
    ),
    (
        r"attribute disclosure",
        "an adversary who has linked a person to their group guesses their sensitive value with probability "
        "at most {t}",
    ),
    (
        r"QIT and ST agree on group sizes",
        "the two published tables agree: each group has as many QIT rows as ST counts (with several rows per "
        "person, ST counts people: no count above the group's people, and at least as many counts as people)",
    ),
    (
        r"people per group",
        "every group holds at least {t} people, a person's several rows counted once",
    ),
    (r"alpha-presence", "the probability of telling that a given person is in the data at all is at most {t}"),
    (r"beta-association", "the probability of naming a person's sensitive value from the tables is at most {t}"),
    (
        r"delta-probability",
        "no published QI value can be tied to one original record with probability above {t}",
    ),
    (
        r"mutual cover \(Corollary 3.2\)",
        "every published QI value could have come from at least {t} records of its group",
    ),
    (
        r"random output tables are distributions",
        "the perturbation MuCo applied is a true probability distribution per record (sums to 1 within {t})",
    ),
    (
        r"identity disclosure \(P_match=(.+)\)",
        "for information (no threshold): expected share of people re-identified by an adversary whose "
        "knowledge matches a published value with probability {1}",
    ),
    (
        r"attribute disclosure \(P_match=(.+)\)",
        "for information (no threshold): expected share of people whose sensitive value such an adversary "
        "(matching with probability {1}) learns",
    ),
    (
        r"series-composition-l",
        "with every release of the series combined, each person of this release keeps at least {t} candidate "
        "sensitive values",
    ),
    (
        r"series-composition-k",
        "with every release of the series combined, at least {t} records (people, with several rows per person) can be "
        "each person's",
    ),
    (
        r"serial-global",
        "over every release of the series, the probability of linking a person to a sensitive value is at most {t}",
    ),
    (r"serial-localized", "in this release, no sensitive value holds more than {t} of any group"),
    (
        r"serial-virtual-members",
        "the absent people counted as group members (virtual members) are backed by people really absent: at most {t}",
    ),
    (r"serial-statistics", "the statistics carried for the series agree with its history"),
]


# --- figure names as a person reads them -------------------------------------------------------

# risk figures (tasks/risk): a short label; the report's risk table says what each measures
RISK_NAMES = {
    "prosecutor-risk-max": "highest re-identification risk",
    "prosecutor-risk-avg": "average re-identification risk",
    "records-at-risk": "share of records at risk",
    "sample-uniques": "share of records unique in the table",
    "attribute-risk-max": "highest chance of guessing a sensitive value",
    "attribute-gain-max": "largest relative gain of a sensitive value",
    "attribute-difference-max": "largest rise of a sensitive value's share",
    "journalist-risk-max": "highest re-identification risk against the population",
    "marketer-risk": "expected share re-identified by linking every record",
    "population-uniques": "estimated share unique in the population",
    "sample-fraction": "share of the population in the table",
}
# population-uniques-<model>: the model that estimated it (tasks/population_models.py)
POPULATION_MODELS = {"zayatz": "first model", "pitman": "second model"}
# privacy checks: a model's own established name stays (k-anonymity, t-closeness: the privacy
# table explains each in a sentence); a name made up for a check reads as plain words
_PRIVACY_NAMES: list[tuple[str, str]] = [
    (r"k-anonymity|k-anonymity QID\d+|k'-anonymity union QID|l-diversity|l-diversity \(distinct\)", "{0}"),
    (r"t-closeness|beta-likeness|attribute disclosure|people per group|alpha-presence|beta-association", "{0}"),
    (r"delta-probability", "{0}"),
    (r"epsilon", "epsilon (differential privacy)"),
    (r"delta", "delta spent by this release"),
    (r"series-epsilon", "epsilon spent by the series (its budget ledger)"),
    (r"series-delta", "delta spent by the series (its budget ledger)"),
    (r"entropy-l-diversity", "entropy l-diversity"),
    (r"recursive-cl-diversity", "recursive (c,l)-diversity"),
    (r"QIT and ST agree on group sizes", "the two tables agree on group sizes"),
    (r"mutual cover \(Corollary 3.2\)", "mutual cover"),
    (r"random output tables are distributions", "the perturbation is a probability distribution"),
    (r"identity disclosure \(P_match=(.+)\)", "expected share re-identified (match probability {1})"),
    (
        r"attribute disclosure \(P_match=(.+)\)",
        "expected share whose sensitive value is learned (match probability {1})",
    ),
    (r"series-composition-l", "l over the whole series"),
    (r"series-composition-k", "k over the whole series"),
    (r"serial-global", "serial guarantee over the series"),
    (r"serial-localized", "serial guarantee in this release"),
    (r"serial-virtual-members", "virtual members backed by absent people"),
    (r"serial-statistics", "series statistics consistent"),
]


def known_label(name: str) -> str | None:
    """The label of any figure a release stores (privacy, utility or risk), None when no mapping
    knows it (tests/test_browser_readable.py: every figure of every technique has one)."""
    name = current_name(name)  # an old state's names read as now
    if name.startswith("input-"):
        inner = known_label(name.removeprefix("input-"))
        return f"{inner} (input)" if inner else None
    if name in RISK_NAMES:
        return RISK_NAMES[name]
    model = name.removeprefix("population-uniques-")
    if model != name and model in POPULATION_MODELS:
        return f"{RISK_NAMES['population-uniques']} ({POPULATION_MODELS[model]})"
    for pattern, text in _PRIVACY_NAMES:
        m = re.fullmatch(pattern, name)
        if m:
            return text.format(m.group(0), *m.groups())
    if name in _FIGURES or re.fullmatch(r"query-error-\d+pct", name) or name.startswith("penalty-"):
        return figure_words(name).label
    return None


def label(name: str) -> str:
    """What the report and explore's page call a figure (never its stored name with _ or its
    made-up hyphenated name); an unknown figure's name with its underscores as spaces."""
    name = current_name(name)  # an old state's names read as now
    return known_label(name) or name.replace("_", " ")


# rows_per_person = "many": k counts people (the k-anonymity result's worst case says "measures": "people")
_PEOPLE_K = (
    "every published combination of quasi-identifier values is shared by at least {t} people, and all of a "
    "person's records are in one such combination: an adversary who knows one or all of a person's records "
    "finds at least {t} people who may be them"
)


def guarantee(model: str, threshold: Any, worst: Mapping[str, Any] | None = None) -> str:
    """In one sentence, what a privacy figure guarantees when its check passes ("" when unknown);
    worst: the result's worst case (it says when the figure counts people)."""
    if model == "k-anonymity" and (worst or {}).get("measures") == "people":
        return _PEOPLE_K.format(t=fmt(threshold) or "the threshold")
    for pattern, text in _GUARANTEES:
        m = re.fullmatch(pattern, model)
        if m:
            return text.format(m.group(0), *m.groups(), t=fmt(threshold) or "the threshold")
    return ""


# --- published cells and worst cases ----------------------------------------------------------


def value_list(values: Any, braces: bool = True) -> str:
    """A list of values as {a, b}, or "12 values: a, b, c, ..." when it is long: never a
    Python repr and never a value cut in the middle."""
    items = [fmt(v) for v in values]
    if len(items) > LONG_LIST:
        return f"{len(items)} values: " + ", ".join(items[:SHOWN]) + ", ..."
    text = ", ".join(items)
    return "{" + text + "}" if braces else text


def cell_text(value: Any) -> str:
    """A published cell as the table shows it: a list as {a, b}, a number as it is."""
    if isinstance(value, (list, tuple, set, np.ndarray)):
        return value_list(list(value))
    if isinstance(value, dict):
        return ", ".join(f"{k} = {cell_text(v)}" for k, v in value.items())
    return fmt(value)


def merged_cells(cells: dict[str, Any]) -> list[tuple[str, Any]]:
    """A class's cells with each `<col>_lo` / `<col>_hi` pair shown as one range "[lo, hi]"
    (one value when both ends agree), in the order the columns come."""
    out: list[tuple[str, Any]] = []
    for key, value in cells.items():
        base = key.removesuffix("_lo")
        if key.endswith("_lo") and f"{base}_hi" in cells:
            lo, hi = fmt(value), fmt(cells[f"{base}_hi"])
            out.append((base, lo if lo == hi else f"[{lo}, {hi}]"))
        elif not (key.endswith("_hi") and f"{key.removesuffix('_hi')}_lo" in cells):
            out.append((key, value))
    return out


_WORST_LABELS = {
    "class": "the class (as published)",
    "size": "rows in the class",
    "distinct_sensitive": "different sensitive values in it",
    "distinct_people": "different people in it",
    "people_in_several_classes": "people with rows in several classes",
    "classes": "classes in the table",
    "qid": "QID columns",
    "gid": "group (gid in the published tables)",
    "group_size": "rows in the group",
    "sensitive_value": "sensitive value",
    "count": "rows with that value",
    "group_people": "people in the group",
    "holding": "people holding that value",
    "at_sizes": "values per AT table",
    "attribute": "column",
    "code": "value code",
    "below": "people below the threshold",
    "people": "people in this release",
    "returning": "returning people (also in an earlier release)",
    "releases": "releases combined",
    "measures": "the figure counts",
    "mode": "on a breach",
    "adversary": "adversary",
    "failing_groups": "groups failing",
    "failing_rows": "rows failing",
    "inconsistent_groups": "inconsistent groups",
    "breaching_pairs": "breaching (person, value) pairs",
    "pairs": "(person, value) pairs checked",
    "violating_groups": "groups failing",
    "groups_not_covered": "groups not covered",
    "witnesses_rejected": "witnesses rejected",
    "links": "releases linked",
    "p": "probability",
    "qi_value": "ST's QI value",
    "qi_units": "units with that QI value",
    "theorem6": "Theorem 6 bound",
    "r1": "rows of the most frequent value",
    "class_share": "share of the worst value in the class",
    "table_share": "its share of the whole table",
    "r_l_to_r_m": "rows of the l-th to last values",
}


def _row_label(model: str) -> str | None:
    """What a worst case's "row" is: the series check's person, by position in this release's
    input rows; MuCo's, a row of the published table. None: not shown."""
    if model.startswith("series-composition"):
        return "the person with the fewest: input row (counting from 1, after dropped rows)"
    if model in ("random output tables are distributions", "mutual cover (Corollary 3.2)"):
        return "row of table.parquet (counting from 0)"
    return None


def worst_cells(worst: Mapping[str, Any], model: str = "") -> list[tuple[str, str | list[tuple[str, str]]]]:
    """A verifier's worst case as (label, text) rows, a nested dict (a class's published cells)
    as its own (column, cell) rows; missing values are left out."""
    rows: list[tuple[str, str | list[tuple[str, str]]]] = []
    for key, value in worst.items():
        if key == "row":
            label = _row_label(model)
            if label is None:
                continue
        else:
            label = _WORST_LABELS.get(key, key.replace("_", " "))
        if isinstance(value, dict):
            inner = [(_WORST_LABELS.get(k, k), cell_text(v)) for k, v in merged_cells(value)]
            rows.append((label, [(k, v) for k, v in inner if v != ""]))
        elif isinstance(value, (list, tuple, np.ndarray)):
            rows.append((label, value_list(list(value), braces=False)))
        elif fmt(value) != "":
            rows.append((label, fmt(value)))
    return rows


def worst_rows(worst: Mapping[str, Any], model: str = "") -> list[tuple[str, str]]:
    """A verifier's worst case as flat (field, value) rows (markdown, no raw JSON)."""
    return [
        (label, text if isinstance(text, str) else ", ".join(f"{k} = {v}" for k, v in text))
        for label, text in worst_cells(worst, model)
    ]
