"""`privpub init DATA --sensitive COL [--person-id COL]` and `privpub.init`: read a table, propose a
spec (each column's role and kind, a few quasi-identifiers and why, hierarchies, the person id and
how many rows a person has, what an empty cell does) and write it as a commented TOML file that
`privpub publish` accepts without edits.

Every column other than the person id and the sensitive one is classified (one vectorised pass
each, by its name and its values; docs/init.md):
- direct identifier (never proposed): near-unique per person (schemas/input.py `is_near_unique`,
  the check publish makes), or named / shaped like an id, a person's name, an email address, a
  phone number, an address, a URL; free text (long, or mostly unique text with spaces, or named
  notes / comments); a date of birth is proposed only truncated to the month or the year;
- quasi-identifier: the demographic, geographic, temporal and administrative attributes an
  adversary can know (by name), then other columns whose name says nothing, at most `max_qi`
  (default 6) in all, each with its reason in a comment;
- sensitive candidate (diagnosis, result, income ...): not a QI, left out (its own release);
- other: one value in every row, beyond the `max_qi` proposed, or too often empty.
Kinds: date (truncated to the month above a year of distinct days, or as far as the unit
stops being near-unique), ordinal (integers with at most ORDINAL_MAX_VALUES values, or a known
text scale), numeric, categorical (`hierarchy = "mask"` for code-like values).
The person id: `--person-id`, or a repeating id-like column found by name (several rows per
value: `rows_per_person = "many"`), else `person_id = "@row"`. `[dataset] missing`: never a policy
that drops more than MAX_DROP_SHARE of the rows: "category" when only categorical QIs have empty
cells, "drop" when it leaves out at most that share; otherwise QIs with empty cells are left out.
Only counts are written or printed about a column, never its values (an ordinal's order is the
one exception: the spec needs it), and nothing at all about the sensitive column's values.
"""

from __future__ import annotations

import csv
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as arrow
import pyarrow.csv as pcsv

from privpub.flows.attempts import for_caller
from privpub.schemas.dates import parse_dates, to_days
from privpub.schemas.errors import InputError, SpecError
from privpub.schemas.input import (
    NEAR_UNIQUE_SHARE,
    NO_HEADER,
    PARQUET_SUFFIXES,
    csv_header_is_data,
    is_near_unique,
    read_duckdb_table,
    refuse_malformed_csv,
)
from privpub.schemas.read_ahead import CSV_NULL_VALUES
from privpub.schemas.spec import MASK_CHAR, MISSING_CATEGORY, ROW_ID, load_spec

DEFAULT_K = 10
DEFAULT_L = 2  # distinct l-diversity proposed when the sensitive column has at least this many values
MAX_QI = 6  # quasi-identifiers proposed at most: each one more splits the classes further
MAX_DROP_SHARE = 0.05  # `missing = "drop"` is proposed only when it leaves out at most this share
MAX_ROWS_PER_PERSON = 20  # a repeating id-like column is a person id with at most this many rows per value
ORDINAL_MAX_VALUES = 10  # integers with at most this many values: an ordinal scale
FREE_TEXT_CHARS = 40  # text this long on average is free text, not a category
MONTHS_FROM_DAYS = 366  # a date with more distinct days than this is truncated to the month
PATTERN_SHARE = 0.5  # a value pattern (email, phone ...) marks a column when this share of its cells match
NAME_MIN_VALUES = 30  # capitalised words with at least this many values look like people's names
# text scales whose order is known (lower case, low to high)
KNOWN_SCALES = (
    ["low", "medium", "high"],
    ["very low", "low", "medium", "high", "very high"],
    ["never", "rarely", "sometimes", "often", "always"],
    ["strongly disagree", "disagree", "neutral", "agree", "strongly agree"],
    ["poor", "fair", "good", "very good", "excellent"],
    ["none", "mild", "moderate", "severe"],
    ["small", "medium", "large"],
    ["xs", "s", "m", "l", "xl"],
)

# Words of a column's name (split at non-letters and camelCase, lower case) and what they say.
# An adversary knows these about a person: demographic, geographic, temporal, administrative.
QI_WORDS = {
    "demographic": {
        "age", "sex", "gender", "race", "ethnicity", "ethnic", "marital", "married", "education", "edu",
        "religion", "nationality", "citizenship", "language", "occupation", "job", "profession", "employment",
        "workclass", "born", "birth", "dob", "birthdate", "birthday", "birthyear", "yob", "children", "household",
    },
    "geographic": {
        "zip", "zipcode", "postcode", "postal", "plz", "city", "town", "village", "region", "county", "state",
        "province", "country", "district", "municipality", "area", "neighbourhood", "neighborhood", "residence",
    },
    "temporal": {
        "date", "day", "month", "year", "week", "time", "visit", "admission", "admitted", "discharge", "period",
        "quarter", "when", "timestamp",
    },
    "administrative": {
        "clinic", "hospital", "site", "department", "dept", "unit", "ward", "center", "centre", "practice",
        "facility", "insurance", "insurer", "provider", "employer", "school", "branch", "office", "program",
        "programme", "specialty", "doctor", "physician",
    },
}  # fmt: skip
BIRTH_WORDS = {"born", "birth", "dob", "birthdate", "birthday"}
# Always a direct identifier, whatever else the name says.
IDENTIFIER_WORDS = {
    "email", "mail", "phone", "telephone", "tel", "mobile", "fax", "ssn", "bsn", "nhs", "passport", "iban",
    "address", "street", "addr", "ip", "url", "username", "login", "password", "surname", "firstname",
    "lastname", "fullname", "forename", "fname", "lname", "givenname", "initials",
}  # fmt: skip
FREE_TEXT_WORDS = {
    "note",
    "notes",
    "comment",
    "comments",
    "remark",
    "remarks",
    "text",
    "description",
    "narrative",
    "memo",
}
# An id or a name: a direct identifier unless a QI word qualifies it ("clinic_id", "city_name").
ID_WORDS = {"id", "ids", "uuid", "guid", "uid", "pid", "mrn", "name", "names"}
PERSON_WORDS = {
    "patient", "subject", "person", "participant", "member", "customer", "client", "user", "employee",
    "student", "respondent", "individual", "case", "record", "resident", "citizen",
}  # fmt: skip
# What an adversary wants to learn rather than knows: a sensitive candidate, not a QI.
SENSITIVE_WORDS = {
    "diagnosis", "diagnoses", "disease", "condition", "icd", "result", "results", "outcome", "drug", "drugs",
    "medication", "medications", "medicine", "treatment", "therapy", "procedure", "hiv", "cancer",
    "pregnancy", "pregnant", "salary", "income", "wage", "wages", "earnings", "debt", "conviction", "crime",
    "offence", "offense", "sexuality", "orientation", "disability", "symptom", "symptoms",
}  # fmt: skip

EMAIL = r"[^@\s]+@[^@\s]+\.[A-Za-z]{2,}"
URL = r"(?i)(https?://|www\.)\S+"
IPV4 = r"\d{1,3}(\.\d{1,3}){3}"
UUID = r"[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}"
PHONE = r"\+?[0-9(][0-9 ()./-]{5,}[0-9]"  # with at least 7 digits (checked apart)
PERSON_NAME = r"[A-Z][a-z]+(?:[ '-][A-Z][a-z]+)*"
VALUE_PATTERNS = (("an email address", EMAIL), ("a URL", URL), ("an IP address", IPV4), ("a UUID", UUID))


@dataclass
class Proposal:
    """A proposed spec: its TOML text and the lines that say what was proposed and why."""

    text: str
    report: list[str] = field(default_factory=list)


@dataclass
class Column:
    """What init decided about one column: a QI entry (kind, its keys) or why it is none."""

    name: str
    why: str
    kind: str | None = None  # None: not a quasi-identifier
    keys: dict = field(default_factory=dict)
    known: bool = False  # a QI whose name says what it is (proposed before the others)


def _names_duckdb_table(text: str) -> bool:
    db, sep, table = text.rpartition(":")
    return bool(sep and db.lower().endswith((".duckdb", ".db")) and table)


def _refuse_odd_columns(frame: pd.DataFrame) -> None:
    """Every column holds one plain value per cell (a list column would fail inside a count)."""
    for name in frame.columns:
        column = frame[name]
        if pd.api.types.is_object_dtype(column.dtype):
            kind = pd.api.types.infer_dtype(column, skipna=True)
            if kind not in ("string", "empty", "integer", "floating", "mixed-integer-float", "decimal", "boolean",
                            "date", "datetime", "mixed", "mixed-integer"):  # fmt: skip
                raise InputError(f"input rejected: column '{name}' holds {kind} cells, not one value per cell")
            if kind in ("mixed", "mixed-integer"):
                nested = column.map(lambda v: isinstance(v, (list, tuple, dict, set, np.ndarray)))
                if nested.any():
                    raise InputError(f"input rejected: column '{name}' holds lists or maps, not one value per cell")
        elif not (
            pd.api.types.is_numeric_dtype(column.dtype)
            or pd.api.types.is_string_dtype(column.dtype)
            or pd.api.types.is_datetime64_any_dtype(column.dtype)
            or isinstance(column.dtype, pd.CategoricalDtype)
        ):
            raise InputError(f"input rejected: column '{name}' holds {column.dtype} cells, not one value per cell")


def read_source(data: str | os.PathLike) -> tuple[pd.DataFrame, dict[str, str]]:
    frame, where = _read_source(data)
    _refuse_odd_columns(frame)
    return frame, where


def _read_source(data: str | os.PathLike) -> tuple[pd.DataFrame, dict[str, str]]:
    """The table and how the spec names it ({"input": path} or {"table": "file.duckdb:t"}).
    A CSV file is read as text (a code such as "01234" keeps its zero; numbers are recognised
    below), as the Arrow reader privpub publishes with reads it."""
    text = str(data)
    db, sep, table = text.rpartition(":")
    if sep and db.lower().endswith((".duckdb", ".db")) and table:
        path = Path(db)
        if not path.is_file():
            raise InputError(f"DuckDB file not found: {path}")
        return read_duckdb_table(path, table), {"table": text}
    path = Path(text)
    if not path.is_file():
        raise InputError(f"input file not found: {path}" if not path.is_dir() else f"{path} is a directory, not a file")
    if path.suffix.lower() in PARQUET_SUFFIXES:
        return pd.read_parquet(path), {"input": text}
    if path.suffix.lower() not in (".csv", ".txt"):
        raise InputError(f"{path}: unknown input format '{path.suffix}' (use .csv, .parquet or file.duckdb:table)")
    refuse_malformed_csv(path)  # bad UTF-8, a NUL byte, a repeated name: as publish refuses them
    if csv_header_is_data(path):  # the "names" are a row's cells: never printed
        raise InputError(f"{path}: {NO_HEADER}")
    with open(path, newline="", encoding="utf-8") as f:
        header = next(csv.reader(f), [])
    try:
        table_ = pcsv.read_csv(
            path,
            convert_options=pcsv.ConvertOptions(
                column_types={c: arrow.string() for c in header},
                null_values=CSV_NULL_VALUES,  # the NA rule publish reads with
                strings_can_be_null=True,
            ),
        )
    except (arrow.ArrowException, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {path}: {type(exc).__name__} (is it a valid CSV file?)") from None
    return table_.to_pandas(), {"input": text}


def _numbers(column: pd.Series) -> pd.Series | None:
    """The column as numbers when every filled cell is one (text read from a CSV file, or a
    numeric dtype), else None. Text with a leading zero ("01234") is a code, not a number."""
    if pd.api.types.is_bool_dtype(column.dtype):
        return None
    if pd.api.types.is_numeric_dtype(column.dtype):
        return column.dropna().astype(float)
    if not (pd.api.types.is_string_dtype(column.dtype) or pd.api.types.is_object_dtype(column.dtype)):
        return None
    text = column.dropna().astype("string").str.strip()
    if text.str.match(r"^[+-]?0\d").any():
        return None
    numbers = pd.to_numeric(text, errors="coerce")
    return numbers.astype(float) if numbers.notna().all() else None


def _dates(column: pd.Series) -> bool:
    """A date column: a date/datetime dtype, or text whose every filled cell is an ISO date (the
    first 100 tried before the whole column)."""
    if pd.api.types.is_datetime64_any_dtype(column.dtype):
        return True
    filled = column.dropna()
    if pd.api.types.is_numeric_dtype(column.dtype) or filled.empty:
        return False
    return bool(parse_dates(filled.head(100)).notna().all() and parse_dates(filled).notna().all())


def _known_scale(values: set[str]) -> list[str] | None:
    """The known scale (in its order, as the data spells it) holding exactly these values."""
    lowered = {v.strip().lower(): v for v in values}
    for scale in KNOWN_SCALES:
        if set(lowered) == set(scale):
            return [lowered[s] for s in scale]
    return None


def _count(n: int, what: str) -> str:
    return f"{n:,} {what}{'' if n == 1 else 's'}"


def _people(n: int) -> str:
    return f"{n:,} {'person' if n == 1 else 'people'}"


def _share(part: int, whole: int) -> str:
    return f"{part / whole:.1%}" if whole else "0%"


def name_words(name: str) -> set[str]:
    """The words of a column name: "firstName", "first_name" and "First Name" give {first, name}."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return {w for w in re.split(r"[^a-z0-9]+", spaced.lower()) if w}


def qi_category(words: set[str]) -> str | None:
    """The kind of attribute an adversary knows that the name says (demographic, ...), or None."""
    return next((cat for cat, known in QI_WORDS.items() if words & known), None)


def _id_word(words: set[str]) -> bool:
    """An id or a name by its words: "id", "name", or one word such as "patientid"."""
    return bool(words & ID_WORDS) or any(w.endswith("id") and w[:-2] in PERSON_WORDS for w in words)


def _matching(values: pd.Series, pattern: str) -> float:
    """The share of the values (text, distinct) that are wholly `pattern` (vectorised)."""
    return float(values.str.fullmatch(pattern).mean()) if len(values) else 0.0


def _value_identifier(values: pd.Series) -> str | None:
    """What the distinct values look like when they are direct identifiers (email, URL, IP, UUID,
    phone number); None when less than PATTERN_SHARE of them match any."""
    for what, pattern in VALUE_PATTERNS:
        if _matching(values, pattern) >= PATTERN_SHARE:
            return what
    phone = values.str.fullmatch(PHONE) & (values.str.count(r"\d") >= 7)
    if len(values) and float(phone.mean()) >= PATTERN_SHARE:
        return "a phone number"
    return None


def _distinct_text(filled: pd.Series) -> pd.Series:
    """A column's distinct filled values as stripped text: the value patterns read these (a few
    categories cost nothing, identifiers are as many as the cells)."""
    return pd.Series(filled.astype("string").str.strip().unique(), dtype="string")


def looks_identifying(name: str, column: pd.Series) -> str | None:
    """Why a column is a direct identifier by its name or its values' shape alone (an email
    address, a person's name ...), whatever its counts; None when it is not."""
    words = name_words(name)
    strong = sorted(words & IDENTIFIER_WORDS)
    if strong:
        return f"its name says '{strong[0]}'"
    if words & {"name", "names"} and not (qi_category(words) or words & SENSITIVE_WORDS):  # not "drug_name"
        return "its name says it is a person's name"
    filled = column.dropna()
    if pd.api.types.is_numeric_dtype(filled.dtype) or pd.api.types.is_datetime64_any_dtype(filled.dtype):
        return None
    values = _distinct_text(filled)
    looks = _value_identifier(values)
    if looks:
        return f"the values look like {looks}"
    named = qi_category(words) or words & SENSITIVE_WORDS  # "Asthma", "Nurse": not people's names
    if not named and len(values) >= NAME_MIN_VALUES and _matching(values, PERSON_NAME) >= 0.9:
        return f"{_count(len(values), 'value')} that look like people's names"
    return None


def _near(distinct: int, people: int) -> str:
    return (
        f"{_count(distinct, 'distinct value')} for {_people(people)}: near-unique per person "
        f"(over {NEAR_UNIQUE_SHARE:.0%} as many values as people), a direct identifier"
    )


def _date_proposal(name: str, column: pd.Series, people: int, birth: bool, why_qi: str) -> Column:
    """A date QI in the finest unit (day, month, year) that is not near-unique per person; more
    than a year of distinct days, or a date of birth, is never proposed by the day."""
    filled = parse_dates(column.dropna())
    days = int(pd.unique(to_days(filled, "day")).size)
    extra = int(column.isna().any())
    for unit in ("day", "month", "year"):
        if unit == "day" and (birth or days > MONTHS_FROM_DAYS):
            continue
        distinct = int(pd.unique(to_days(filled, unit)).size) + extra
        if is_near_unique(distinct, people):
            continue
        what = f"a date with {_count(days, 'distinct day')}"
        if birth:
            what = f"a date of birth with {_count(days, 'distinct day')} (the full date identifies people)"
        keys = {} if unit == "day" else {"hierarchy": unit}
        how = "" if unit == "day" else f"; published as ranges of whole {unit}s"
        # a date is temporal whatever its name says
        why = why_qi or " (temporal: an adversary may know it)"
        return Column(name, f"quasi-identifier: {what}{how}{why}", "date", keys, known=True)
    return Column(name, f"not a QI: a date near-unique per person even by the year ({_count(days, 'distinct day')})")


@dataclass(frozen=True)
class Seen:
    """What `propose_column` learned of a column before deciding (counts, never values)."""

    name: str
    words: set[str]
    category: str | None  # the QI category its name says, if any
    distinct: int
    extra: int  # 1 when an empty cell may become a value of its own ("category")
    n: int
    people: int

    @property
    def why_qi(self) -> str:
        return f" ({self.category}: an adversary may know it)" if self.category else ""

    @property
    def known(self) -> bool:
        return bool(self.category)


def propose_column(name: str, column: pd.Series, n: int, people: int | None = None) -> Column:
    """The proposal for one column (not the person id or the sensitive column) of a table of `n`
    rows and `people` people (n when each row is a person)."""
    people = n if people is None else people
    words = name_words(name)
    filled = column.dropna()
    distinct = int(filled.nunique())
    seen = Seen(name, words, qi_category(words), distinct, int(len(filled) < len(column)), n, people)
    if distinct <= 1:
        return Column(name, "not a QI: one value in every row (it tells nobody apart)")
    strong = sorted(words & IDENTIFIER_WORDS)
    if strong:
        return Column(name, f"not a QI: a direct identifier (its name says '{strong[0]}')")
    if words & FREE_TEXT_WORDS:
        return Column(name, "not a QI: free text (its name says so)")
    if _dates(column):
        return _date_proposal(name, column, people, bool(words & BIRTH_WORDS), seen.why_qi)
    numbers = _numbers(column)
    if numbers is not None:
        return _numeric_proposal(seen, numbers)
    text = filled.astype("string")
    return _text_refusal(seen, text, filled) or _text_proposal(seen, text)


def _numeric_proposal(seen: Seen, numbers: pd.Series) -> Column:
    """A column of numbers: refused (unique, sensitive, near-unique, an id), an ordinal scale of
    few integers, or numeric."""
    name, words, distinct, category = seen.name, seen.words, seen.distinct, seen.category
    if distinct == seen.n:
        return Column(name, "not a QI: numbers unique per row (identifier-like)")
    if words & SENSITIVE_WORDS and not category:  # income, a lab result: however many values
        return Column(name, "not a QI: a sensitive candidate (an adversary wants to learn it, not knows it)")
    if is_near_unique(distinct + seen.extra, seen.people):
        return Column(name, f"not a QI: numbers with {_near(distinct + seen.extra, seen.people)}")
    if _id_word(words) and not category:
        return Column(name, "not a QI: a direct identifier (its name says it is an id)")
    integral = bool(np.all(np.mod(numbers.to_numpy(), 1) == 0))
    if integral and distinct <= ORDINAL_MAX_VALUES:
        order = [int(v) for v in np.unique(numbers.to_numpy())]
        return Column(
            name,
            f"quasi-identifier: an ordinal scale of {distinct} integers (the order: their numeric order){seen.why_qi}",
            "ordinal",
            {"order": order},
            known=seen.known,
        )
    return Column(
        name, f"quasi-identifier: numbers with {_count(distinct, 'value')}{seen.why_qi}", "numeric", known=seen.known
    )


def _text_refusal(seen: Seen, text: pd.Series, filled: pd.Series) -> Column | None:
    """Why a column of text is not a QI (unique, identifier-like values, free text, near-unique,
    an id or a name, a sensitive candidate), or None."""
    name, words, distinct, category = seen.name, seen.words, seen.distinct, seen.category
    if distinct == seen.n:
        return Column(name, "not a QI: unique per row (identifier-like)")
    looks = _value_identifier(_distinct_text(filled))
    if looks:
        return Column(name, f"not a QI: a direct identifier (the values look like {looks})")
    if text.str.len().mean() > FREE_TEXT_CHARS or (distinct > seen.n / 2 and text.str.contains(" ").mean() > 0.5):
        return Column(name, "not a QI: free text")
    if is_near_unique(distinct + seen.extra, seen.people):
        return Column(name, f"not a QI: {_near(distinct + seen.extra, seen.people)}")
    if _id_word(words) and not category:
        said = "a person's name" if words & {"name", "names"} else "an id"
        return Column(name, f"not a QI: a direct identifier (its name says it is {said})")
    if words & SENSITIVE_WORDS and not category:
        return Column(name, "not a QI: a sensitive candidate (an adversary wants to learn it, not knows it)")
    if not category and distinct >= NAME_MIN_VALUES and _matching(_distinct_text(filled), PERSON_NAME) >= 0.9:
        return Column(name, f"not a QI: {_count(distinct, 'value')} that look like people's names")
    return None


def _text_proposal(seen: Seen, text: pd.Series) -> Column:
    """A column of text as a QI: a known scale (ordinal), codes (masked), or categories."""
    name, distinct = seen.name, seen.distinct
    scale = _known_scale(set(text.unique())) if distinct <= 5 else None
    if scale is not None:
        return Column(
            name,
            f"quasi-identifier: a known scale of {distinct} values{seen.why_qi}",
            "ordinal",
            {"order": scale},
            known=seen.known,
        )
    lengths = text.str.len()
    code_like = (
        distinct > 10
        and lengths.nunique() <= 2
        and lengths.min() >= 3
        and bool(text.str.fullmatch(r"[A-Za-z0-9.\-]+").all())
        and bool(text.str.contains(r"\d").all())
        and not bool(text.str.contains(MASK_CHAR, regex=False).any())
    )
    if code_like:
        return Column(
            name,
            f"quasi-identifier: codes of {'/'.join(map(str, sorted(lengths.unique())))} characters with "
            f"{_count(distinct, 'value')}; generalized by masking their last characters{seen.why_qi}",
            "categorical",
            {"hierarchy": "mask"},
            known=seen.known,
        )
    return Column(
        name,
        f"quasi-identifier: categories with {_count(distinct, 'value')}{seen.why_qi}",
        "categorical",
        known=seen.known,
    )


def find_person_id(frame: pd.DataFrame, exclude: set[str]) -> str | None:
    """A repeating id-like column: named as an id ("patient_id", "pid", "subjectId") or holding
    UUIDs, never empty, with several rows per value but at most MAX_ROWS_PER_PERSON on average
    (a clinic's id repeats far more); the one with the most values."""
    n = len(frame)
    found: list[tuple[int, str]] = []
    for name in frame.columns:
        column = frame[name]
        if name in exclude or column.isna().any():
            continue
        words = name_words(name)
        id_like = _id_word(words) and not (words & {"name", "names"}) and not qi_category(words)
        textual = pd.api.types.is_object_dtype(column.dtype) or pd.api.types.is_string_dtype(column.dtype)
        if not (id_like or (textual and _matching(_distinct_text(column), UUID) == 1.0)):
            continue
        distinct = int(column.nunique())
        if 1 < distinct < n and distinct * MAX_ROWS_PER_PERSON >= n:
            found.append((distinct, name))
    return max(found)[1] if found else None


def _toml(value) -> str:
    """A TOML value: strings as JSON strings (TOML's basic strings escape the same way)."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return str(value)


@dataclass
class _Plan:
    """The QIs chosen, what `missing` does and the columns left out on the way (with why)."""

    qis: list[Column]
    missing: str | None
    missing_note: str
    dropped: int
    left_out: dict[str, str]


def _empty(frame: pd.DataFrame, names: list[str]) -> np.ndarray:
    if not names:
        return np.zeros(len(frame), dtype=bool)
    return np.asarray(frame[names].isna().to_numpy().any(axis=1), dtype=bool)


def _plan(frame: pd.DataFrame, base: list[str], ranked: list[Column], max_qi: int, people_of) -> _Plan:
    """The first `max_qi` of `ranked` (known QIs first) under a `missing` policy that drops at most
    MAX_DROP_SHARE of the rows: "category" when only categorical QIs have empty cells, else
    "drop" within that share; a QI that forces more is left out (a non-categorical one first),
    and the next one moves up. After a "drop", a QI near-unique among the rows kept is left out
    too (publish would refuse it)."""
    n = len(frame)
    limit = int(MAX_DROP_SHARE * n)
    left_out: dict[str, str] = {}
    while True:
        qis = [c for c in ranked if c.name not in left_out][:max_qi]
        categorical = [c.name for c in qis if c.kind == "categorical"]
        others = [*base, *(c.name for c in qis if c.kind != "categorical")]
        any_empty = _empty(frame, [*others, *categorical])
        rows = int(any_empty.sum())
        if not rows:
            plan = _Plan(qis, None, "", 0, left_out)
        elif not _empty(frame, others).any():
            note = (
                f'an empty cell of a categorical QI becomes the value "{MISSING_CATEGORY}": {_count(rows, "row")} '
                f'({_share(rows, n)}) have one; "drop" would leave them out'
            )
            plan = _Plan(qis, "category", note, 0, left_out)
        elif rows <= limit:
            note = f"{_count(rows, 'row')} ({_share(rows, n)}) with an empty cell are left out"
            plan = _Plan(qis, "drop", note, rows, left_out)
        else:
            with_empty = [c for c in qis if frame[c.name].isna().any()]
            if not with_empty:
                base_rows = int(_empty(frame, base).sum())
                raise InputError(
                    f"{_count(base_rows, 'row')} ({_share(base_rows, n)}) have an empty person id or sensitive cell: "
                    f'more than {MAX_DROP_SHARE:.0%} would be dropped; fill them, or write missing = "drop" in the '
                    "spec yourself"
                )
            # a non-categorical QI first (it is what stops "category"), the emptiest first
            worst = max(with_empty, key=lambda c: (c.kind != "categorical", int(frame[c.name].isna().sum())))
            count = int(frame[worst.name].isna().sum())
            left_out[worst.name] = (
                f"not proposed: empty in {_count(count, 'row')} ({_share(count, n)}); with it, more than "
                f"{MAX_DROP_SHARE:.0%} of the rows would be dropped"
            )
            continue
        kept = frame.loc[~any_empty] if plan.missing == "drop" else frame
        people = people_of(kept)
        counts = {c.name: _distinct_as_read(kept[c.name], c) for c in qis}
        near = next((c for c in qis if is_near_unique(counts[c.name], people)), None)
        if near is None:
            return plan
        left_out[near.name] = f"not a QI: {_near(counts[near.name], people)}"


def _distinct_as_read(column: pd.Series, c: Column) -> int:
    """A QI's distinct values as publish counts them (dates in their unit, an empty category one)."""
    filled = column.dropna()
    extra = int(len(filled) < len(column))
    if c.kind == "date":
        return int(pd.unique(to_days(parse_dates(filled), c.keys.get("hierarchy", "day"))).size) + extra
    numbers = _numbers(column) if c.kind == "numeric" else None
    return int((numbers if numbers is not None else filled.astype("string")).nunique()) + extra


@dataclass
class Chosen:
    """What `propose` decided for a table: the person id (given, found or none), its people, each
    column's proposal and the quasi-identifiers chosen (with `_plan`'s missing-cell choice)."""

    label: str
    n: int
    n_columns: int
    sensitive: str
    person_id: str | None
    detected: bool  # the person id was found, not given
    many: bool  # rows_per_person = "many"
    people: int
    proposals: list[Column]
    qis: list[Column]
    missing: str | None
    missing_note: str
    guard: bool  # the sensitive column can give distinct l = DEFAULT_L


def propose(
    frame: pd.DataFrame,
    source: dict[str, str],
    sensitive: str,
    person_id: str | None,
    spec_dir: Path,
    label: str,
    max_qi: int = MAX_QI,
) -> Proposal:
    """The spec proposed for `frame` (read from `source`) and its report lines."""
    columns = [str(c) for c in frame.columns]
    frame = frame.set_axis(columns, axis=1)
    _check_arguments(frame, columns, sensitive, person_id, max_qi)
    chosen = _choose(frame, columns, sensitive, person_id, max_qi, label)
    where = source.copy()
    if "input" in where and not Path(where["input"]).is_absolute():
        where["input"] = os.path.relpath(Path(where["input"]).resolve(), spec_dir.resolve())
    lines = [*_dataset_lines(chosen, where), *_technique_lines(chosen)]
    return Proposal("\n".join(lines), _report_lines(chosen))


def _check_arguments(
    frame: pd.DataFrame, columns: list[str], sensitive: str, person_id: str | None, max_qi: int
) -> None:
    """The options refused before anything is proposed (one line each)."""
    for role, given in (("sensitive", sensitive), ("person id", person_id)):
        if given is not None and given not in columns:
            option = for_caller(f"--{role.replace(' ', '-')} {given!r}", f"{role.replace(' ', '_')}={given!r}")
            raise InputError(f"{option}: no such column; the table has {', '.join(columns)}")
    if person_id == sensitive:
        raise InputError(
            for_caller("--person-id and --sensitive", "person_id and sensitive") + " must be different columns"
        )
    if isinstance(max_qi, bool) or not isinstance(max_qi, int) or max_qi < 1:
        raise SpecError(
            for_caller(f"--max-qi {max_qi!r}", f"max_qi={max_qi!r}") + ": must be a whole number of at least 1"
        )
    if frame.empty:
        raise InputError("input has no rows")
    why = looks_identifying(sensitive, frame[sensitive])
    if why:  # the sensitive column is published as it is
        raise InputError(
            f"{for_caller('--sensitive ', 'sensitive=')}'{sensitive}' looks like a direct identifier ({why}): "
            "it would be published as it is; "
            "choose the attribute the release is about"
        )


def _choose(
    frame: pd.DataFrame, columns: list[str], sensitive: str, person_id: str | None, max_qi: int, label: str
) -> Chosen:
    """The person id, each column's proposal, and the quasi-identifiers chosen among them."""
    n = len(frame)
    detected = person_id is None
    if detected:
        person_id = find_person_id(frame, {sensitive})
    many = person_id is not None and bool(frame[person_id].dropna().duplicated().any())

    def people_of(rows: pd.DataFrame) -> int:
        return int(rows[person_id].nunique()) if many and person_id is not None else len(rows)

    people = people_of(frame)
    proposals = [propose_column(c, frame[c], n, people) for c in columns if c not in (sensitive, person_id)]
    ranked = [p for p in proposals if p.kind and p.known] + [p for p in proposals if p.kind and not p.known]
    base = [c for c in (person_id, sensitive) if c is not None]
    plan = _plan(frame, base, ranked, max_qi, people_of)
    qis = plan.qis
    if not qis:
        raise InputError("no column looks like a quasi-identifier; write the spec by hand (docs/spec.md)")
    names = {p.name for p in qis}
    for p in proposals:
        if p.name in plan.left_out:
            p.kind, p.why = None, plan.left_out[p.name]
        elif p.kind and p.name not in names:
            p.kind, p.why = None, f"not proposed: {p.why}, beyond the {max_qi} proposed (add it by hand if needed)"
    if plan.missing != "drop" and _empty(frame, [*base, *(p.name for p in qis)]).all():
        raise InputError("every row has an empty cell in a column the release would read")
    # distinct l = 2 when the sensitive column can give it: without a model on the sensitive column
    # the report says nothing guards it, however many people share a group
    guard = bool(frame[sensitive].nunique() >= DEFAULT_L)
    return Chosen(
        label,
        n,
        len(columns),
        sensitive,
        person_id,
        detected,
        many,
        people,
        proposals,
        qis,
        plan.missing,
        plan.missing_note,
        guard,
    )


def _dataset_lines(chosen: Chosen, where: dict[str, str]) -> list[str]:
    """The spec's header and [dataset] section, each proposal's reason beside it."""
    n, people, label = chosen.n, chosen.people, chosen.label
    pid = chosen.person_id or ROW_ID
    if chosen.person_id is None:
        pid_note = "  # no person id given or found: the row number (from 1) stands for it; every row is a person"
    elif chosen.detected:
        pid_note = f"  # found: an id that repeats ({_people(people)} in {_count(n, 'row')})"
    else:
        pid_note = ""
    lines = [
        f"# privpub spec proposed by `privpub init` from {label} ({_count(n, 'row')}, {_count(chosen.n_columns, 'column')}).",
        "# Review the proposals below (kinds, quasi-identifiers, hierarchies, k), then: privpub publish <this file>",
        "",
        "[dataset]",
        f"name = {_toml(Path(label.split(':')[0]).stem or 'dataset')}  # the series: its releases are checked together",
        *(
            f"{key} = {_toml(value)}" + ("  # relative to this file" if key == "input" else "")
            for key, value in where.items()
        ),
        f"person_id = {_toml(pid)}{pid_note}",
    ]
    if chosen.many:
        lines.append(
            f'rows_per_person = "many"  # {_people(people)} in {_count(n, "row")}: a person may have several '
            "rows; every privacy figure counts people"
        )
    lines.append(f"sensitive = {_toml(chosen.sensitive)}  # published as it is; never a quasi-identifier")
    if chosen.missing:
        lines.append(f"missing = {_toml(chosen.missing)}  # {chosen.missing_note}")
    lines.append("qi = [")
    for p in chosen.qis:
        entry = {"name": p.name, "kind": p.kind, **p.keys}
        lines.append(f"  # {p.why}")
        lines.append("  { " + ", ".join(f"{k} = {_toml(v)}" for k, v in entry.items()) + " },")
    lines.append("]")
    lines += [f"# '{p.name}': {p.why}" for p in chosen.proposals if not p.kind]
    return lines


def _technique_lines(chosen: Chosen) -> list[str]:
    """The spec's [technique] and [output] sections."""
    return [
        "",
        "[technique]",
        'name = "generalization"  # Mondrian generalization: every row shares its published QI values with k - 1 others',
        f"k = {DEFAULT_K}",
        *(
            [
                f"l = {DEFAULT_L}  # every group holds at least {DEFAULT_L} different {chosen.sensitive} values (no "
                "certain disclosure); for a skewed column also consider beta or t (docs/models.md)"
            ]
            if chosen.guard
            else []
        ),
        "",
        "[output]",
        'dir = "releases"  # the published releases, beside this file',
        'state = "privpub.duckdb"  # the release history',
        "",
    ]


def _report_lines(chosen: Chosen) -> list[str]:
    """What `privpub init` prints: what was proposed and why (counts, never values)."""
    n = chosen.n
    if chosen.person_id is None:
        who = f"row number ({ROW_ID}): no {for_caller('--person-id', 'person_id')} given"
    else:
        who = f"'{chosen.person_id}'" + (" (found: an id that repeats)" if chosen.detected else "")
    report = [
        f"{chosen.label}: {_count(n, 'row')}, {_count(chosen.n_columns, 'column')}",
        "person id: " + who,
        *([f'rows_per_person = "many": {_people(chosen.people)} in {_count(n, "row")}'] if chosen.many else []),
        f"sensitive: '{chosen.sensitive}'",
        *(f"  {p.name}: {p.why}" + (f" [{p.kind}]" if p.kind else "") for p in chosen.proposals),
    ]
    if chosen.missing:
        report.append(f"missing = {_toml(chosen.missing)}: {chosen.missing_note}")
    report.append(f"technique: generalization, k = {DEFAULT_K}" + (f", l = {DEFAULT_L}" if chosen.guard else ""))
    return report


def init(
    data: str | os.PathLike,
    *,
    sensitive: str,
    person_id: str | None = None,
    output: str | os.PathLike = "spec.toml",
    force: bool = False,
    report: list[str] | None = None,
    max_qi: int = MAX_QI,
) -> Path:
    """Propose a spec for a table and write it as a commented TOML file to review.

    Parameters: ``data``, the table (a CSV or Parquet file, or ``"file.duckdb:table"``);
    ``sensitive``, the column published as it is; ``person_id``, the column naming each person
    (default: a repeating id-like column if there is one, else each row is a person);
    ``output``, the spec file to write; ``force``, overwrite it if it exists; ``report``, a list
    that receives the lines saying what was proposed and why; ``max_qi``, at most this many
    quasi-identifiers.

    Returns the written file's path. The spec is checked as publish checks it before it is written.

    Raises InputError for a table or column that cannot be used; SpecError when ``output``
    exists (without ``force``) or is the input itself.

    Example: ``privpub.init("visits.csv", sensitive="diagnosis", output="visits.toml")``."""
    out = Path(output)
    source_file = Path(str(data).rpartition(":")[0] if _names_duckdb_table(str(data)) else str(data))
    if out.exists() and source_file.exists() and out.resolve() == source_file.resolve():
        raise SpecError(f"{for_caller('-o ', 'output=')}{out} is the input itself; name another file for the spec")
    if out.exists() and not force:
        raise SpecError(
            f"{out} exists; "
            + for_caller("choose another -o or pass --force", "choose another output= or pass force=True")
            + " to overwrite it"
        )
    if out.is_dir():
        raise SpecError(f"{out} is a directory, not a spec file")
    frame, source = read_source(data)
    proposal = propose(frame, source, sensitive, person_id, out.parent, Path(str(data)).name, max_qi)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(proposal.text, encoding="utf-8")
    try:
        load_spec(tmp)  # what publish checks first: a proposal it refuses is a bug here, never written
    except SpecError:
        tmp.unlink()
        raise
    tmp.replace(out)
    if report is not None:
        report += proposal.report
    return out
