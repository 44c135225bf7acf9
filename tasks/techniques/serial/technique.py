"""Serial publishing with the global guarantee for transient sensitive values (issue 5).

Spec ([technique]): name = "serial", l (>= 2), strategy = "constant-ratio" (releases = k, default
20) | "geometric" (factor > 1, default 2) | "localized" (baseline, not safe for a series),
transient = "all" (default) | [values] | a fraction in (0, 1) (that share of the distinct values,
least frequent first, in the current snapshot), min_group_size (default l), max_group_size
(default max(1000, 5 * first ratio)), suppress (default true: withhold the sensitive value of a
tuple no group within max_group_size can hold; false: refuse the release instead).

What the flow puts in `data.extra` (and passes again in the verify context):
  serial_lookup     from the store (tasks/techniques/serial/stored.StoredPairs): reads the pairs a release needs
  serial_stats      history rows of the committed releases (statistics.HISTORY_COLUMNS), or None
  serial_aggregate  optional, in memory: the per-pair aggregate of those rows (saves rebuilding it)
  serial_summary    optional: pairs, breaching pairs and worst pair of the committed series
  serial_release    optional: this release's number in the series (default: last + 1)
  registration      optional: the registration list (person id + QI columns) as a DataFrame
                    (its ids compared as pseudonyms when serial_pseudonyms is given)
  serial_pseudonyms optional: the state's keyed hash (state/pseudonyms.py); the person ids are
                    then compared with the stored history, and stored, as their pseudonyms
What the release carries privately: serial_stats (this release's history rows), serial_pairs (with
a lookup: the new state of the pairs it names) or serial_aggregate (without: the whole aggregate
after it) -- commit_hook moves either into the serial_pairs table --, serial_summary (after it),
membership (person, gid), transient (the protected values), release (its number).

Verification has two modes, with the same figures (tests/test_serial_incremental.py). Given the
history rows (`serial_stats`, what `privpub verify` loads) it rebuilds the aggregate and rechecks
every pair of the series. Given only the carried aggregate and summary (publishing), it rechecks
the pairs of the people in the release and takes the rest from the summary: O(size of the release).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np
import pandas as pd
import pandera.pandas as pda
import pyarrow as pa
import pyarrow.compute as pc

from privpub.schemas.errors import InputError, PrivacyRefused, SpecError, StateError
from privpub.schemas.published import generalized_table_schema
from privpub.schemas.spec import ReleaseSpec
from privpub.state.store import Store
from privpub.tasks.core.microdata import Microdata
from privpub.tasks.core.technique import RANGES, Capabilities, Description, Technique, find_result
from privpub.tasks.core.types import ChunkPlan, Partition, PriorContext, PrivacyResult, Release, VerifyContext
from privpub.tasks.evaluate.estimate_generalized import estimate_from_generalized
from privpub.tasks.evaluate.quality import QualityView
from privpub.tasks.report.figures import fmt
from privpub.tasks.techniques.registry import register
from privpub.tasks.techniques.serial import groups as serial_groups
from privpub.tasks.techniques.serial import guarantee as sg
from privpub.tasks.techniques.serial import pairs
from privpub.tasks.techniques.serial import statistics as st
from privpub.tasks.techniques.serial import stored as ss
from privpub.tasks.techniques.serial.grouping import Requirements, grow_groups, zorder
from privpub.tasks.techniques.serial.params import SerialParams
from privpub.tasks.techniques.serial.publish import generalize, published_tables
from privpub.tasks.verify.published import qi_columns


def pair_source(source: PriorContext) -> pairs.PairSource | None:
    """Where the committed series' pairs are read from, given data.extra or a verify context:
    the state database (`serial_lookup`), or in memory the aggregate carried
    (`serial_aggregate`) or rebuilt from the history rows (`serial_stats`)."""
    if source.get("serial_lookup") is not None:
        lookup: pairs.PairSource = source["serial_lookup"]
        return lookup
    if source.get("serial_aggregate") is not None:
        return pairs.MemoryPairs(source["serial_aggregate"])
    if source.get("serial_stats") is not None:
        return pairs.MemoryPairs(st.aggregate(source["serial_stats"]))
    return None


def next_release_number(source: PriorContext) -> int:
    if source.get("serial_release") is not None:
        return int(source["serial_release"])
    hist = source.get("serial_stats")
    if hist is None or len(hist) == 0:
        return 1
    col = hist.column("release").to_numpy() if isinstance(hist, pa.Table) else hist["release"].to_numpy()
    return int(np.max(col)) + 1


def _members(membership: pa.Table, virtual: pa.Table | None) -> pa.Table:
    """Real tuples and virtual members of a release as one (person, gid, virtual) table."""
    parts = [membership.select(["person", "gid"])]
    if virtual is not None and virtual.num_rows:
        parts.append(virtual.select(["person", "gid"]))
    try:
        parts = [t.cast(parts[0].schema) for t in parts]
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # ids of other types: keep them as text
        text = pa.schema([("person", pa.string()), ("gid", pa.int64())])
        parts = [t.cast(text) for t in parts]
    virtual_flag = np.repeat([False, True][: len(parts)], [t.num_rows for t in parts])
    return pa.concat_tables(parts).append_column("virtual", pa.array(virtual_flag))


@register
class SerialTechnique(Technique):
    name = "serial"
    Params = SerialParams
    params: SerialParams
    table_names = ("table", "groups")
    capabilities = Capabilities(
        uses_history=True,
        guards_series=True,  # the global guarantee is its series check (docs/series.md)
        risk_note=(
            "The figures are this release's alone, its generalized table read like generalization's "
            "(a withheld sensitive value, published as null, is nobody's value in attribute-risk-max). "
            "What an adversary learns by linking a person across the releases of the series is the "
            "serial guarantee's figure (privacy table), not these."
        ),
    )

    def check_params(self) -> None:
        p = self.params
        try:
            self.ratio_strategy = sg.make_strategy(p.strategy, p.l, p.releases, p.factor)
        except ValueError as exc:
            raise SpecError(f"[technique] {exc}") from None
        # the group size bounds, defaults filled in
        self.min_size = p.l if p.min_group_size is None else p.min_group_size
        first = float(self.ratio_strategy.first)
        self.max_size = max(1000, int(np.ceil(5 * first))) if p.max_group_size is None else p.max_group_size

    # --- history from the store ---------------------------------------------------------------
    def prior_context(self, store: Store, spec: ReleaseSpec, before_sequence: int | None = None) -> PriorContext:
        """What the next release needs: a lookup of its people's pairs in serial_pairs and the
        series summary (both written in the previous commit transaction), the next release
        number, and the registration list when the spec names one. Re-verifying (before_sequence)
        loads every earlier release's history rows and the stored pairs to compare them with."""
        ctx: dict[str, Any] = {}
        series = spec.dataset.name
        store.upgrade()  # a state file of an earlier version: its statistics in today's tables
        latest = store.latest_release(series, technique=self.name, before_sequence=before_sequence)
        top = ss.head(store, series) if before_sequence is None else None
        if before_sequence is None and (latest is None or (top is not None and top[0] == latest)):
            # the statistics tables: the pairs of this release's people are read when known
            ctx["serial_lookup"] = ss.StoredPairs(store, series)
            if top is not None:
                ctx["serial_summary"], ctx["serial_release"] = top[2], top[1] + 1
        elif latest is not None:
            # re-verification, or a state whose latest release was committed before migration 3:
            # the aggregate that release carried (the next commit moves it into serial_pairs)
            private = store.private(latest)
            if before_sequence is None and private.get("serial_aggregate") is None:
                raise StateError(
                    f"release {latest} of series '{series}' is the latest but the serial "
                    "statistics hold neither it nor its carried aggregate; the state is damaged"
                )
            if private.get("serial_aggregate") is not None:
                ctx["serial_aggregate"] = private["serial_aggregate"]
            ctx["serial_summary"] = private.get("serial_summary")
            ctx["serial_release"] = int(private["release"]) + 1
        if before_sequence is not None:
            ctx["serial_pairs_asof"] = ss.pairs_as_of(store, series)
            ctx["serial_sequence"] = before_sequence
            # re-verifying a committed release: the whole history, so that every pair is
            # rechecked from the rows rather than trusted from the carried aggregate, and the
            # release's own rows and membership, which its commit moved into the tables
            ctx["serial_stats"] = ss.history_rows(store, series, before_sequence)
            hist = store.history(series)
            own = hist[hist.sequence == before_sequence].release_id
            if len(own):
                ctx["serial_own"] = ss.release_private(store, series, own.iloc[0])
        if before_sequence is None or spec.dataset.registration:
            # the state keys people by pseudonym (state/pseudonyms.py): this release's ids and the
            # registration list's are compared with it, and stored, as pseudonyms. Re-verifying
            # without a registration list reads only stored pseudonyms and needs no key.
            ctx["serial_pseudonyms"] = store.pseudonyms()
        if spec.dataset.registration:
            path = spec.path(spec.dataset.registration)
            if not path.is_file():
                raise InputError(f"registration list not found: {path}")
            ctx["registration"] = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
        return ctx

    def person_keys(self, data: Microdata) -> np.ndarray:
        """The release's person ids as the series' statistics key them: their pseudonyms when the
        flow gave the state's key (`serial_pseudonyms`), else the ids themselves (the technique
        used without a state). Only compared and stored: nothing published is ordered by them."""
        ids = data.frame[self.spec.dataset.person_id].to_numpy()
        keys = (data.extra or {}).get("serial_pseudonyms")
        return ids if keys is None else keys.of_numpy(ids)

    def registration(self, source: PriorContext) -> pd.DataFrame | None:
        """The registration list (data.extra / the verify context), its ids keyed as `person_keys`
        keys the release's, so that the two are compared like with like."""
        reg, keys = source.get("registration"), source.get("serial_pseudonyms")
        pid = self.spec.dataset.person_id
        if reg is None or keys is None or not len(reg) or pid not in reg.columns:
            unkeyed: pd.DataFrame | None = reg
            return unkeyed
        keyed: pd.DataFrame = reg.assign(**{pid: keys.of_numpy(reg[pid].to_numpy())})
        return keyed

    def commit_hook(self, release: Release) -> Callable[[Any, str, int], None] | None:
        """Moves the statistics out of the private metadata into the serial tables, inside the
        commit transaction: the history rows and membership (appended), the pairs this release
        names (upsert) or, after an old-format release, the whole aggregate (replace), and the
        summary. Called before the commit reads `release.private`, so none of them is also stored
        as a per-release blob."""
        private = release.private
        if "serial_stats" not in private:
            return None
        replace = "serial_pairs" not in private
        stored = private.pop("serial_pairs", None)
        if stored is None:
            stored = private.pop("serial_aggregate", None)
        stored = st.as_stored(stored) if stored is not None else st.aggregate_to_arrow(st.aggregate(None))
        members = _members(private.pop("membership"), private.pop("virtual_members", None))
        return ss.statistics_writer(
            self.spec.dataset.name,
            pairs=stored,
            history=private.pop("serial_stats"),
            members=members,
            summary=private["serial_summary"],
            release=int(private["release"]),
            replace=replace,
        )

    # --- which values are protected --------------------------------------------------------
    def protected_values(self, data: Microdata) -> np.ndarray:
        values = data.sensitive_values
        if self.params.transient == "all":
            return values
        if isinstance(self.params.transient, list):
            listed: np.ndarray = values[pd.Index(values).isin(self.params.transient)]
            return listed
        freq = np.bincount(data.sensitive_codes[data.sensitive_codes >= 0], minlength=len(values))
        take = max(1, int(round(self.params.transient * len(values))))
        protected: np.ndarray = values[np.sort(np.argsort(freq, kind="stable")[:take])]
        return protected

    def check_data(self, data: Microdata) -> None:
        ids = data.frame[self.spec.dataset.person_id]
        if ids.duplicated().any():
            raise ValueError("serial publishing needs one tuple per person in a release")

    # --- partition: the groups ---------------------------------------------------------------
    def partition(self, data: Microdata, rng: np.random.Generator) -> Partition:
        self.check_data(data)
        persons = pd.Index(self.person_keys(data))
        protected = self.protected_values(data)
        is_protected = np.isin(
            np.arange(len(data.sensitive_values)), pd.Index(data.sensitive_values).get_indexer(protected)
        )
        code = np.where(
            (data.sensitive_codes >= 0) & is_protected[np.maximum(data.sensitive_codes, 0)], data.sensitive_codes, -1
        ).astype(np.int64)

        # required ratios: `first` for pairs without history and for every pair at or below the
        # strategy's p_floor, so only the other (special) pairs are read. Float bounds from p_hi
        # size the groups; only pairs near a bound are turned into exact ratios here, and
        # _check_requirements checks every member exactly afterwards.
        source = pair_source(data.extra or {})
        values = np.asarray(data.sensitive_values, dtype=object)
        person_ids = persons.to_numpy()
        view = pairs.requirement_view(
            source, person_ids, values, pd.Index(values).get_indexer(protected), self.ratio_strategy.p_floor
        )
        ratio_hi, need_exact = self.ratio_strategy.ratio_bound(view["p_hi"])
        first_hi = self.ratio_strategy.first_hi
        own = view["code"] == code[view["row"]]
        need_exact |= own & (np.ceil(ratio_hi) > self.max_size)  # suppression decided exactly
        idx = np.flatnonzero(need_exact)
        if len(idx):
            assert source is not None  # pairs needing an exact state come from a source
            _, _, q, d = source.state(person_ids[view["row"][idx]], values[view["code"][idx]])
            ratio_hi[idx] = sg.ratio_upper_bound(*self.ratio_strategy.required_many(q, d))

        # a holder whose own pair needs a group above the cap cannot be published with its value
        suppressed = np.zeros(data.n, dtype=bool)
        hopeless = view["row"][own & (np.ceil(ratio_hi) > self.max_size)]
        suppressed[hopeless] = True
        code[hopeless] = -1

        coords, virtual_cols, virtual_ids = self._points(data, persons)
        n_points = len(coords)
        order = zorder(coords)
        where = np.empty(n_points, dtype=np.int64)
        where[order] = np.arange(n_points)
        value = np.concatenate([code, np.full(n_points - data.n, -1, dtype=np.int64)])
        real = np.arange(n_points) < data.n
        special = ratio_hi > first_hi
        pos = where[view["row"][special]]
        by_pos = np.argsort(pos, kind="stable")
        req = Requirements(
            value=value[order],
            real=real[order],
            first=first_hi,
            pos=pos[by_pos],
            code=view["code"][special][by_pos],
            ratio=ratio_hi[special][by_pos],
            min_size=self.min_size,
            cap=self.max_size,
        )
        grown = grow_groups(req)
        group = grown.group[where]
        suppressed |= grown.suppressed[where][: data.n]
        sizes = np.bincount(group[group >= 0], minlength=grown.n_groups)
        if suppressed.any() and not self.params.suppress:
            raise PrivacyRefused(
                f"the global guarantee cannot be met for {int(suppressed.sum())} tuples "
                "without suppressing their sensitive value (suppress = false)"
            )

        info = {
            "suppressed": suppressed,
            "sizes": sizes,
            "virtual_group": group[data.n :],
            "virtual_columns": virtual_cols,
            "virtual_ids": virtual_ids,
            "protected": protected,
            "release": next_release_number(data.extra or {}),
            "person_keys": person_ids,
        }
        part = Partition(group=group[: data.n].astype(np.int64), n_groups=grown.n_groups, info=info)
        self._check_requirements(data, part, np.where(suppressed, -1, code), source)
        return part

    def _points(self, data: Microdata, persons: pd.Index) -> tuple[np.ndarray, list[np.ndarray], np.ndarray]:
        """Coordinates of real tuples then virtual members, the virtual members' QI columns and ids."""
        real_cols = [
            data.frame[d.name].to_numpy(dtype=float) if d.kind == "numeric" else data.codes[:, j]
            for j, d in enumerate(data.domains)
        ]
        reg = self.registration(data.extra or {})
        virtual_cols = [np.zeros(0, dtype=c.dtype) for c in real_cols]
        virtual_ids = np.zeros(0, dtype=object)
        if reg is not None and len(reg):
            reg = reg[~pd.Index(reg[self.spec.dataset.person_id].to_numpy()).isin(persons)]
            reg = reg.drop_duplicates(self.spec.dataset.person_id)
            cols, ok = [], np.ones(len(reg), dtype=bool)
            for d in data.domains:
                if d.kind == "numeric":
                    c = pd.to_numeric(reg[d.name], errors="coerce").to_numpy(dtype=float)
                    ok &= ~np.isnan(c)
                else:
                    c = pd.Index(d.values).get_indexer(reg[d.name].astype(str).to_numpy())
                    ok &= c >= 0
                cols.append(c)
            virtual_cols = [c[ok] for c in cols]
            virtual_ids = reg[self.spec.dataset.person_id].to_numpy()[ok]
        columns = [np.concatenate([r, v]).astype(float) for r, v in zip(real_cols, virtual_cols)]
        return np.column_stack(columns), virtual_cols, virtual_ids

    def _check_requirements(
        self, data: Microdata, part: Partition, code: np.ndarray, source: pairs.PairSource | None
    ) -> None:
        """Exact: |G| * den >= n(s) * num for every member and protected value of its group, with
        the required ratio of every stored pair computed from its exact q and d (so the float
        bounds and p_floor that sized the groups are checked too)."""
        rows = st.release_rows(
            part.info["person_keys"],
            part.group,
            part.info["sizes"],
            code,
            np.asarray(data.sensitive_values, dtype=object),
            0,
        )
        req_num = np.full(len(rows), self.ratio_strategy.first.numerator, dtype=object)
        req_den = np.full(len(rows), self.ratio_strategy.first.denominator, dtype=object)
        if source is not None and len(rows):
            known, _, q, d = source.state(rows["person"].to_numpy(), rows["value"].to_numpy(dtype=object))
            num, den = self.ratio_strategy.required_many(q[known], d[known])
            req_num[known] = num
            req_den[known] = den
        size = rows["size"].to_numpy(dtype=np.int64).astype(object)
        count = rows["count"].to_numpy(dtype=np.int64).astype(object)
        ok = np.asarray(size * req_den >= count * req_num, dtype=bool) & np.asarray(req_den > 0, dtype=bool)
        if not ok.all():
            raise RuntimeError(f"serial grouping left {int((~ok).sum())} pairs below their required ratio")

    # --- anonymize: the published tables ------------------------------------------------------
    def anonymize(self, data: Microdata, part: Partition, rng: np.random.Generator) -> Release:
        info = part.info
        ds = self.spec.dataset
        point_group = np.concatenate([part.group, info["virtual_group"]])
        columns = []
        for j, d in enumerate(data.domains):
            real = data.frame[d.name].to_numpy(dtype=float) if d.kind == "numeric" else data.codes[:, j]
            columns.append(np.concatenate([real, info["virtual_columns"][j]]))
        per_group = generalize(data.domains, columns, point_group, part.n_groups)
        sensitive = data.frame[ds.sensitive].to_numpy(dtype=object)
        tables = published_tables(part.group, sensitive, info["suppressed"], ds.sensitive, per_group, info["sizes"])
        person = info["person_keys"] if "person_keys" in info else self.person_keys(data)
        code = np.where(info["suppressed"], -1, data.sensitive_codes).astype(np.int64)
        code[~np.isin(code, pd.Index(data.sensitive_values).get_indexer(info["protected"]))] = -1
        rows = st.release_rows(
            person, part.group, info["sizes"], code, np.asarray(data.sensitive_values, dtype=object), info["release"]
        )
        extra = data.extra or {}
        source = pair_source(extra)
        lookup = extra.get("serial_lookup") is not None
        if lookup:  # only the named pairs are needed: the store keeps the others
            before = pairs.matching(source, rows)
            aggregate, after = None, st.combine([before, st.history_terms(rows)])
        else:
            # not a lookup: the pairs, if any, are held in memory
            aggregate, before, after = st.advance(source.table if isinstance(source, pairs.MemoryPairs) else None, rows)
        prior_summary = extra.get("serial_summary")
        if prior_summary is None and isinstance(source, pairs.MemoryPairs):  # not a lookup
            prior_summary = sg.stored_summary(source, self.params.l)  # a series stored before summaries
        summary = sg.advance_summary(prior_summary, before, after, self.params.l)
        sizes = info["sizes"]
        n_virtual = int(sizes.sum() - data.n)
        return Release(
            tables=tables,
            private={
                "serial_stats": st.history_to_arrow(rows),
                # from the store: only the pairs this release names, upserted by commit_hook;
                # otherwise (in memory, or an old-format state) the whole new aggregate
                **({"serial_pairs": st.aggregate_to_arrow(after)} if lookup else {"serial_aggregate": aggregate}),
                "serial_summary": summary,
                "membership": pa.table({"person": pa.array(person), "gid": pa.array(part.group)}),
                # which registered absentee each virtual member is: the witness the per-region
                # check of the virtual members verifies
                "virtual_members": pa.table(
                    {
                        "person": pa.array(info["virtual_ids"][info["virtual_group"] >= 0]),
                        "gid": pa.array(info["virtual_group"][info["virtual_group"] >= 0]),
                    }
                ),
                "transient": list(info["protected"]),
                "release": info["release"],
            },
            info={
                "release": info["release"],
                "strategy": type(self.ratio_strategy).__name__,
                "groups": part.n_groups,
                "avg_group_size": float(sizes.mean()) if len(sizes) else 0.0,
                "max_group_size": int(sizes.max()) if len(sizes) else 0,
                "suppressed": int(info["suppressed"].sum()),
                "virtual_members": n_virtual,
            },
        )

    # --- verify: from the published tables, membership and the committed history -------------
    def one_piece(self, release: Release) -> bool:
        """One verify step for a table of at most chunk_rows rows."""
        rows: int = release.tables["table"].num_rows  # pyarrow is untyped
        return rows <= self.spec.run.chunk_rows

    def split_verify(
        self, release: Release, context: VerifyContext
    ) -> ChunkPlan[serial_groups.GroupRun, serial_groups.GroupFigures, list[PrivacyResult]]:
        """The per-group half (localized guarantee, history rows) in runs of group ids of about
        `[run] chunk_rows` published rows (verify chunks on the task runner, groups.py); the
        global guarantee, which reads the series' pairs from the store, and the virtual members'
        check in the combine, in the flow."""
        own = release
        release = self._with_own(release, context or {})
        chunks = serial_groups.group_chunks(
            release.tables["table"],
            release.tables["groups"],
            release.private["membership"],
            l=self.params.l,
            sensitive=self.spec.dataset.sensitive,
            transient=release.private.get("transient"),
            release=release.private.get("release", 0),
            chunk_rows=self.spec.run.chunk_rows,
        )
        return ChunkPlan(chunks, serial_groups.group_figures, partial(self._combine_verify, own, context))

    @staticmethod
    def _with_own(release: Release, ctx: PriorContext) -> Release:
        if "membership" not in release.private and ctx.get("serial_own"):
            # a committed release re-verified: its rows and membership live in the serial tables
            return Release(release.tables, {**release.private, **ctx["serial_own"]}, release.info)
        return release

    def _combine_verify(
        self, release: Release, context: PriorContext, results: list[serial_groups.GroupFigures]
    ) -> list[PrivacyResult]:
        ctx = context or {}
        release = self._with_own(release, ctx)
        published = serial_groups.localized_and_rows(results, self.params.l)
        extra: list[PrivacyResult] = []
        stored, seq = ctx.get("serial_pairs_asof"), ctx.get("serial_sequence")
        # the state database's statistics hold a pair last changed at or before this release
        compare_stored = (
            stored is not None
            and seq is not None
            and bool(stored.num_rows and pc.any(pc.less_equal(stored.column("sequence"), seq)).as_py())
        )
        rebuilt = None
        if ctx.get("serial_stats") is not None:  # the history rows: recheck every pair
            rebuilt = st.aggregate(ctx["serial_stats"])
            check = sg.check_rows(*published, rebuilt, l=self.params.l)
            if ctx.get("serial_aggregate") is not None and not compare_stored:
                # the carried statistics the next release will trust, against the history rows
                same = st.same_aggregate(st.as_stored(ctx["serial_aggregate"]), rebuilt)
                extra.append(
                    PrivacyResult(
                        "serial-statistics",
                        "carried aggregate = history" if same else "carried aggregate differs from the history rows",
                        None,
                        same,
                        {"pairs": len(rebuilt)},
                    )
                )
        else:
            check = sg.check_rows_incremental(*published, pair_source(ctx), ctx.get("serial_summary"), l=self.params.l)
        if compare_stored:
            # serial_pairs against the history rows up to and including this release
            own = st.history_terms(st.as_frame(release.private["serial_stats"], st.HISTORY_COLUMNS))
            after = st.combine([rebuilt, own] if rebuilt is not None else [own])
            assert seq is not None  # see compare_stored
            same, detail = ss.compare(stored, after, int(seq))
            extra.append(
                PrivacyResult(
                    "serial-statistics",
                    "stored statistics = history" if same else "stored statistics differ from the history rows",
                    None,
                    same,
                    detail,
                )
            )
        verdicts = list(check.results) + extra
        verdicts.append(self._virtual_check(release, ctx))
        return verdicts

    def _virtual_check(self, release: Release, ctx: PriorContext) -> PrivacyResult:
        """Every group's virtual members are distinct registered people absent from the release
        whose QIs lie inside that group's published region (the witness is the release's private
        `virtual_members`). Without a witness (releases published before it was kept) only the
        total is checked: virtual members claimed <= registered people absent."""
        table, groups = release.tables["table"], release.tables["groups"]
        gid = np.asarray(table.column("gid").to_numpy(), dtype=np.int64)
        g_ids = np.asarray(groups.column("gid").to_numpy(), dtype=np.int64)
        n_gid = int(g_ids.max()) + 1 if len(g_ids) else 0
        claimed = (
            np.asarray(groups.column("size").to_numpy(), dtype=np.int64) - np.bincount(gid, minlength=n_gid)[g_ids]
        )
        reg = self.registration(ctx)
        pid = self.spec.dataset.person_id
        reg = reg.drop_duplicates(pid) if reg is not None and len(reg) else None
        present = pd.Index(release.private["membership"].column("person").to_pandas())
        absent = 0 if reg is None else int((~pd.Index(reg[pid]).isin(present)).sum())
        witness = release.private.get("virtual_members")
        if witness is None:
            return PrivacyResult(
                "serial-virtual-members",
                int(claimed.sum()),
                absent,
                int(claimed.sum()) <= absent,
                {"checked": "total only (no witness)"},
            )
        wit = witness.to_pandas()
        bad = np.zeros(len(wit), dtype=bool)
        if reg is None:
            bad[:] = True
        else:
            at = pd.Index(reg[pid]).get_indexer(wit["person"].to_numpy())
            bad |= (at < 0) | pd.Index(wit["person"]).isin(present) | wit["person"].duplicated().to_numpy()
            bad |= ~self._inside(table, wit["gid"].to_numpy(dtype=np.int64), reg.iloc[np.maximum(at, 0)])
        per_group = np.bincount(wit["gid"].to_numpy(dtype=np.int64)[~bad], minlength=n_gid)
        uncovered = claimed > per_group[g_ids]
        return PrivacyResult(
            "serial-virtual-members",
            int(claimed.sum()),
            absent,
            not uncovered.any(),
            {
                "groups_not_covered": int(uncovered.sum()),
                "witnesses_rejected": int(bad.sum()),
                "checked": "per group region",
            },
        )

    def _inside(self, table: pa.Table, gid: np.ndarray, people: pd.DataFrame) -> np.ndarray:
        """Whether each person lies inside the published region of the given group."""
        ok = np.ones(len(gid), dtype=bool)
        if not len(gid):
            return ok
        t_gid = np.asarray(table.column("gid").to_numpy(), dtype=np.int64)
        g, first = np.unique(t_gid, return_index=True)
        row = first[np.clip(np.searchsorted(g, gid), 0, len(g) - 1)]
        ok &= g[np.clip(np.searchsorted(g, gid), 0, len(g) - 1)] == gid
        for q in self.spec.dataset.qi:
            if f"{q.name}_lo" in table.column_names:
                x = pd.to_numeric(people[q.name], errors="coerce").to_numpy(dtype=float)
                lo = table.column(f"{q.name}_lo").to_numpy(zero_copy_only=False)[row].astype(float)
                hi = table.column(f"{q.name}_hi").to_numpy(zero_copy_only=False)[row].astype(float)
                ok &= (lo <= x) & (x <= hi)
            else:  # a list cell: the person's value must be one of the group's listed values
                cells = table.column(q.name).take(pa.array(row)).combine_chunks()
                parent = pc.list_parent_indices(cells).to_numpy()
                flat = cells.flatten().to_numpy(zero_copy_only=False).astype(str)
                listed = pd.MultiIndex.from_arrays([parent, flat])
                mine = pd.MultiIndex.from_arrays([np.arange(len(row)), people[q.name].astype(str).to_numpy()])
                ok &= mine.isin(listed)
        return ok

    # --- utility: the shared count-query workload ----------------------------------------------
    def estimate_counts(self, release: Release, workload: Any) -> np.ndarray:
        """Uniformity inside each group's ranges and sets, as for generalization; suppressed
        (null) values never match a query's sensitive value."""
        ds = self.spec.dataset
        return estimate_from_generalized(release.tables["table"], ds.qi_names, ds.sensitive, workload)

    def group_sizes(self, release: Release) -> np.ndarray:
        """Group sizes as published (virtual members included)."""
        sizes: np.ndarray = release.tables["groups"].column("size").to_numpy()  # pyarrow is untyped
        return sizes

    def describe(self, privacy: Sequence[PrivacyResult], sensitive: str) -> Description:
        gl, lo = find_result(privacy, "serial-global"), find_result(privacy, "serial-localized")
        return Description(
            published_as=RANGES,
            sentences=(
                f"The release is one of a series in which people return and their {sensitive} values may change"
                + (
                    f": with every release of the series combined, the probability of linking a person to a value of "
                    f"{sensitive} is at most {fmt(gl.threshold)} (serial-global {fmt(gl.value)})"
                    if gl
                    else ""
                )
                + (f"; within this release no value holds more than {fmt(lo.threshold)} of a group" if lo else ""),
            ),
        )

    def quality_view(self, release: Release) -> QualityView:
        """One row per real tuple (a withheld sensitive value: null, read as any value); a class
        is a published group, bound to hold min_group_size (default l) members, virtual ones
        included in its size."""
        sizes = self.group_sizes(release)
        k = self.params.min_group_size if self.params.min_group_size is not None else self.params.l
        return QualityView(release.tables["table"], self.spec.dataset.sensitive, classes=sizes, k=k)

    def risk_table(self, release: Release) -> tuple[Any, list[str]] | None:
        table = release.tables["table"]
        return table, qi_columns(table, self.spec.dataset.qi_names)

    def table_schemas(self, spec: ReleaseSpec) -> dict[str, Any]:
        gid = pda.Column(int, pda.Check.ge(0), coerce=True)
        return {
            "table": generalized_table_schema(spec.dataset, extra={"gid": gid}, sensitive_nullable=True),
            "groups": pda.DataFrameSchema(
                {
                    "gid": pda.Column(int, pda.Check.ge(0), unique=True, coerce=True),
                    "size": pda.Column(int, pda.Check.ge(1), coerce=True),
                },
                strict=True,
            ),
        }
