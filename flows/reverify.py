"""Re-verify a committed release from what was published (`privpub verify RELEASE_ID`)."""

from __future__ import annotations

import contextlib
import json
import math
from dataclasses import asdict
from decimal import Decimal, InvalidOperation
from pathlib import Path

from privpub.flows.attempts import current_actor
from privpub.flows.cluster import dask_task_runner
from privpub.flows.history_check import Check, check_line, history_lines
from privpub.schemas.names import inside
from privpub.schemas.spec import spec_from_dict
from privpub.state.ledger import amount, exact
from privpub.state.store import Store, published_sha256
from privpub.tasks.compose.budget import release_spend
from privpub.tasks.compose.rebuild import replay
from privpub.tasks.core.parted_table import PartedTable, read_published
from privpub.tasks.core.types import PrivacyResult, Release, VerifyContext
from privpub.tasks.report import page as report
from privpub.tasks.report import verdict as report_verdict
from privpub.tasks.report.series import SERIES_FIGURES
from privpub.tasks.risk import risk_settings
from privpub.tasks.risk.parted import release_attribute, release_risk, release_riskiest
from privpub.tasks.techniques.registry import get_technique
from privpub.tasks.verify.published import PEOPLE_IN


def load_release(store: Store, release_id: str):
    rel = store.release(release_id)
    spec = spec_from_dict(
        {k: v for k, v in rel["spec"].items() if k != "base_dir"},
        base_dir=rel["spec"].get("base_dir", "."),
        stored=True,
    )
    folder = Path(rel["output_dir"]) / release_id
    problems, tables = [], {}
    for t in rel["tables"].itertuples():
        path = folder / t.file
        if not path.exists():
            problems.append(f"missing published file {path}")
            continue
        if published_sha256(path) != t.sha256:
            problems.append(f"{path} differs from what was committed (sha256 mismatch)")
            continue
        tables[t.table_name] = read_published(path)
    return rel, spec, Release(tables, private=store.private(release_id)), problems


def _on_cluster(stack: contextlib.ExitStack, spec, release) -> None:
    """A table written as parts is read part by part: on the spec's Dask cluster when its [run]
    names one (the same workers that built it, or a LocalCluster), else in this process."""
    parted = [t for t in release.tables.values() if isinstance(t, PartedTable)]
    if parted and spec.run.task_runner == "dask":
        executor = stack.enter_context(dask_task_runner(spec.run))
        for table in parted:
            table.executor = executor


def reverify(state: Path, release_id: str, actor: str | None = None) -> tuple[bool, list[str]]:
    """(all passed, the lines `privpub verify` prints: a header, then one per check)."""
    ok, header, checks = reverify_checks(state, release_id, actor)
    return ok, [header, *(c.line for c in checks)]


def reverify_checks(state: Path, release_id: str, actor: str | None = None) -> tuple[bool, str, list[Check]]:
    """(all passed, the header line, one Check per line after it); logged in the audit log."""
    store = Store(state)
    store.upgrade()  # a state of an earlier version gets its chain first (migration 10)
    rel, spec, release, problems = load_release(store, release_id)
    with contextlib.ExitStack() as stack:
        _on_cluster(stack, spec, release)
        ok, lines = _reverify(store, release_id, actor, rel, spec, release, problems)
    checks = [check_line(line, "published files" if i < len(problems) else "") for i, line in enumerate(lines[1:])]
    return ok, lines[0], checks


def _reverify(store, release_id, actor, rel, spec, release, problems):
    lines = [f"release {release_id} (series {rel['series']}, #{rel['sequence']}, {rel['technique']})"]
    lines += [f"FAIL {p}" for p in problems]
    history_ok, history = history_lines(store, [release_id])
    # with the files failing, only a failing history is said (the checks from the files are not run)
    lines += [line for line in history if not problems or line.startswith("FAIL")]
    ok = not problems and history_ok
    if not problems:
        technique = get_technique(spec)
        context = VerifyContext(None, technique.prior_context(store, spec, before_sequence=rel["sequence"]), rel)
        for r in technique.verify(release, context):
            need = f" (required {r.threshold})" if r.threshold is not None else ""
            lines.append(f"{'PASS' if r.passed else 'FAIL'} {r.model}: {r.value}{need}")
            ok &= r.passed
        ok &= _composition(store, rel, lines, len(technique.composition_views()))
        ok &= _risk(technique, release, spec, rel, lines)
        ok &= _spend(technique, rel, lines)
    store.log(current_actor(actor), "verify", release_id, "pass" if ok else "fail", None, {"lines": lines})
    return ok, lines


def _risk(technique, release, spec, rel: dict, lines: list[str]) -> bool:
    """The release's risk figures recomputed from its published table (docs/risk.md), compared
    with those stored at publish and with the spec's [risk] limits; the input's figures cannot be
    recomputed (the input is not kept) and are shown as stored."""
    m = rel["metrics"]
    stored = {r.name: r.text_value for r in m[m.kind == "risk"].itertuples()}
    settings = risk_settings(spec)
    # the input's records: its people under rows_per_person = "many" (kept private), else its rows
    population = settings.population_size(int(release.private.get(PEOPLE_IN, rel["rows_in"])))
    figures = release_risk(technique, release, settings.threshold, population)
    if not figures:
        if stored:
            lines.append(f"INFO risk: not computed from {rel['technique']}'s published tables yet (docs/risk.md)")
        return True
    limits = dict(settings.limits)
    ok = True
    for name, value in figures.items():
        at_publish, before = stored.get(name), stored.get(f"input-{name}")
        same = at_publish is None or at_publish == str(value)
        # a share is at most 1; a gain over the base rate is a ratio, bounded by its limit only
        passed = same and value <= limits.get(name, math.inf if name == "attribute-gain-max" else 1.0)
        ok &= passed
        lines.append(
            f"{'PASS' if passed else 'FAIL'} {name}: {value:.4g}"
            + (f" (limit {limits[name]:g})" if name in limits else "")
            + (f", input {float(before):.4g} at publish" if before is not None else "")
            + ("" if same else f"; the publish stored {at_publish}")
        )
    return ok


def _spend(technique, rel: dict, lines: list[str]) -> bool:
    """A DP release's recorded spend (its `epsilon` and `delta` figures, which the series' ledger
    sums) against what its stored parameters give (Technique.privacy_spend, docs/dp.md)."""
    spend = release_spend(technique)
    if spend is None:
        return True
    m = rel["metrics"]
    stored = {r.name: r.text_value for r in m[(m.kind == "privacy") & m.name.isin(["epsilon", "delta"])].itertuples()}
    try:
        recorded: tuple[Decimal, Decimal] | None = (exact(stored["epsilon"]), exact(stored.get("delta") or "0"))
    except (KeyError, InvalidOperation):  # a figure missing or not a number
        recorded = None
    passed = recorded == spend
    lines.append(
        f"{'PASS' if passed else 'FAIL'} privacy spend: the parameters give epsilon = {amount(spend[0])}, "
        f"delta = {amount(spend[1])}"
        + ("" if passed else f"; the release recorded epsilon = {stored.get('epsilon')}, delta = {stored.get('delta')}")
    )
    return passed


def _composition(store: Store, rel: dict, lines: list[str], views: int = 1) -> bool:
    """The series composition figure replayed from every release's stored groups (docs/series.md)
    and compared with the figure stored at publish; True when there is none to check. views:
    the adversaries composed (Butterfly: one per QID, each person stored once per QID)."""
    m = rel["metrics"]
    stored = m[(m.kind == "privacy") & m.name.str.startswith("series-composition")]
    if not len(stored):
        return True
    row = stored.iloc[0]
    threshold = int(row.threshold)
    got = replay(store, rel["series"], int(rel["sequence"]), row["name"].endswith("-l"), threshold)
    if got is None:  # no stored groups (a state database whose summaries were dropped)
        lines.append(
            f"SKIP {row['name']}: {row.text_value} at publish; the series has no stored groups to replay it from"
        )
        return True
    fig, below, releases = got
    same = str(fig) == str(row.text_value)
    passed = fig >= threshold and same
    lines.append(
        f"{'PASS' if passed else 'FAIL'} {row['name']}: {fig} (required {threshold}), "
        f"{below} {'(person, QID) pairs' if views > 1 else 'people'} below, replayed over {releases} releases"
        + ("" if same else f"; the publish stored {row.text_value}")
        # the breach is the one the publish recorded and accepted: say so, the exit stays 1
        + (
            '; a breach accepted at publish ([series] composition = "warn")'
            if same and not passed and not row.passed
            else ""
        )
    )
    return passed


def rewrite_report(state: Path, release_id: str) -> str:
    store = Store(state)
    rel, spec, release, problems = load_release(store, release_id)
    technique = get_technique(spec)
    context = VerifyContext(None, technique.prior_context(store, spec, before_sequence=rel["sequence"]), rel)
    with contextlib.ExitStack() as stack:
        _on_cluster(stack, spec, release)
        privacy = technique.verify(release, context) if not problems else []
        sizes = technique.group_sizes(release)
        riskiest = release_riskiest(technique, release) if not problems else None
        # the release's side only: the input is not kept
        attribute = {"release": release_attribute(technique, release)[1]} if not problems else None
    m = rel["metrics"]
    utility = {r.name: (r.value if r.value == r.value else r.text_value) for r in m[m.kind == "utility"].itertuples()}
    privacy += stored_composition(m)  # what the series check said at publish (`verify` replays it)
    folder = Path(rel["output_dir"]) / release_id
    figures = store.series_figures(rel["series"], [r.model for r in privacy] + SERIES_FIGURES)
    risk = {r.name: r.value for r in m[m.kind == "risk"].itertuples()}
    meta = {
        **rel,
        "files": [str(folder / f) for f in rel["tables"].file],
        "risk": risk,
        "riskiest": riskiest,
        "attribute": attribute,
        "risk_note": technique.capabilities.risk_note,
        # the report's words in the technique's own terms (its describe hook: the report imports no technique)
        "technique_words": asdict(technique.describe(privacy, spec.dataset.sensitive or "sensitive")),
        "people_in": release.private.get(PEOPLE_IN),  # rows_per_person = "many": the input's people
        **report_verdict.spec_facts(spec),
        # the series as it stood at this release (later releases are not part of its report)
        "series_figures": None if figures is None else figures[figures.sequence <= rel["sequence"]],
    }
    # rewritten in place: only inside the release's own folder (its id a name, schemas/names.py)
    written = inside(Path(rel["output_dir"]), release_id, "report.html")
    return str(report.write_html_report(written, meta, privacy, utility, sizes))


def stored_composition(metrics) -> list[PrivacyResult]:
    """The series composition figure stored at publish, as the report shows it."""
    rows = metrics[(metrics.kind == "privacy") & metrics.name.str.startswith("series-composition")]
    return [
        PrivacyResult(r.name, int(r.value), int(r.threshold), bool(r.passed), json.loads(r.detail or "{}"))
        for r in rows.itertuples()
    ]
