"""Serial publishing with the global guarantee for transient sensitive values (issue 5).

Spec ([technique]): name = "serial", l (>= 2), strategy = "constant-ratio" (releases = k, default
20) | "geometric" (factor > 1, default 2) | "localized" (baseline, not safe for a series),
transient = "all" (default) | [values] | a fraction in (0, 1) (that share of the distinct values,
least frequent first, in the current snapshot), min_group_size (default l), max_group_size
(default max(1000, 5 * first ratio)), suppress (default true: withhold the sensitive value of a
tuple no group within max_group_size can hold; false: refuse the release instead).

What the flow puts in `data.extra` (and passes again in the verify context):
  serial_stats      history rows of the committed releases (statistics.HISTORY_COLUMNS), or None
  serial_aggregate  optional: the per-pair aggregate of those rows (saves rebuilding it)
  serial_release    optional: this release's number in the series (default: last + 1)
  registration      optional: the registration list (person id + QI columns) as a DataFrame
What the release carries privately: serial_stats (this release's history rows), membership
(person, gid), transient (the protected values), release (its number).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from schemas.spec import SpecError
from tasks.anonymize.base import Partition, PrivacyRefused, PrivacyResult, Release, Technique, register
from tasks.microdata import Microdata
from tasks.serial import statistics as st
from tasks.serial.grouping import Requirements, grow_groups, zorder
from tasks.serial.publish import generalize, published_tables
from tasks.verify import serial_guarantee as sg


def prior_aggregate(source: dict[str, Any]) -> pd.DataFrame | None:
    """The committed series' per-pair aggregate from a data.extra / verify context dict."""
    if source.get("serial_aggregate") is not None:
        agg = source["serial_aggregate"]
        return st.aggregate_from_arrow(agg) if isinstance(agg, pa.Table) else agg
    if source.get("serial_stats") is not None:
        return st.aggregate(source["serial_stats"])
    return None


def next_release_number(source: dict[str, Any]) -> int:
    if source.get("serial_release") is not None:
        return int(source["serial_release"])
    hist = source.get("serial_stats")
    if hist is None or len(hist) == 0:
        return 1
    col = hist.column("release").to_numpy() if isinstance(hist, pa.Table) else hist["release"].to_numpy()
    return int(np.max(col)) + 1


@register("serial")
class SerialTechnique(Technique):
    table_names = ("table", "groups")
    uses_history = True

    def check_params(self) -> None:
        self.l = self.int_param("l", minimum=2)
        if self.l is None:
            raise SpecError("[technique] serial needs l (an integer >= 2)")
        name = self.params.get("strategy", "constant-ratio")
        k = self.int_param("releases", 20)
        factor = self.spec.technique.fraction("factor", 2)
        if name == "geometric" and not factor > 1:
            raise SpecError(f"[technique] factor must be > 1, got {self.params.get('factor')!r}")
        try:
            self.strategy = sg.make_strategy(name, self.l, k, factor)
        except ValueError as exc:
            raise SpecError(f"[technique] {exc}") from None
        self.transient = self.params.get("transient", "all")
        if not (self.transient == "all" or isinstance(self.transient, list)
                or (isinstance(self.transient, float) and 0 < self.transient < 1)):
            raise SpecError("[technique] transient must be \"all\", a list of values or a fraction in (0, 1)")
        self.allow_suppression = self.params.get("suppress", True)
        if not isinstance(self.allow_suppression, bool):
            raise SpecError("[technique] suppress must be true or false")
        self.min_size = self.int_param("min_group_size", self.l)
        first = float(self.strategy.first)
        self.max_size = self.int_param("max_group_size", max(1000, int(np.ceil(5 * first))))

    # --- history from the store ---------------------------------------------------------------
    def prior_context(self, store, spec, before_sequence: int | None = None) -> dict[str, Any]:
        """The per-pair aggregate after the latest earlier serial release of the series (kept in
        that release's private metadata, written in its commit transaction), the next release
        number, and the registration list when the spec names one."""
        ctx: dict[str, Any] = {}
        latest = store.latest_release(spec.dataset.name, technique=self.name, before_sequence=before_sequence)
        if latest is not None:
            private = store.private(latest)
            ctx["serial_aggregate"] = private["serial_aggregate"]
            ctx["serial_release"] = int(private["release"]) + 1
        if spec.dataset.registration:
            from schemas.input import InputError

            path = spec.path(spec.dataset.registration)
            if not path.is_file():
                raise InputError(f"registration list not found: {path}")
            ctx["registration"] = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
        return ctx

    # --- which values are protected --------------------------------------------------------
    def protected_values(self, data: Microdata) -> np.ndarray:
        values = data.sensitive_values
        if self.transient == "all":
            return values
        if isinstance(self.transient, list):
            return values[pd.Index(values).isin(self.transient)]
        freq = np.bincount(data.sensitive_codes[data.sensitive_codes >= 0], minlength=len(values))
        take = max(1, int(round(self.transient * len(values))))
        return values[np.sort(np.argsort(freq, kind="stable")[:take])]

    def check_data(self, data: Microdata) -> None:
        ids = data.frame[self.spec.dataset.person_id]
        if ids.duplicated().any():
            raise ValueError("serial publishing needs one tuple per person in a release")

    # --- partition: the groups ---------------------------------------------------------------
    def partition(self, data: Microdata, rng: np.random.Generator) -> Partition:
        self.check_data(data)
        persons = pd.Index(data.frame[self.spec.dataset.person_id].to_numpy())
        protected = self.protected_values(data)
        is_protected = np.isin(np.arange(len(data.sensitive_values)),
                               pd.Index(data.sensitive_values).get_indexer(protected))
        code = np.where((data.sensitive_codes >= 0) & is_protected[np.maximum(data.sensitive_codes, 0)],
                        data.sensitive_codes, -1).astype(np.int64)

        # required ratios: `first` for pairs without history, a lookup for the others
        prior = prior_aggregate(data.extra or {})
        if prior is None:
            prior = st.as_frame(None, st.AGGREGATE_COLUMNS)
        pairs = st.lookup(prior, persons, pd.Index(data.sensitive_values))
        keep = is_protected[pairs["code"]] if len(pairs["code"]) else np.zeros(0, dtype=bool)
        pairs = {k: v[keep] for k, v in pairs.items()}
        num, den = self.strategy.required_many(pairs["q"], pairs["d"])
        ratio_hi = sg.ratio_upper_bound(num, den)
        first_hi = float(sg.ratio_upper_bound(np.array([self.strategy.first.numerator], dtype=object),
                                              np.array([self.strategy.first.denominator], dtype=object))[0])

        # a holder whose own pair needs a group above the cap cannot be published with its value
        suppressed = np.zeros(data.n, dtype=bool)
        own = pairs["code"] == code[pairs["row"]]
        hopeless = pairs["row"][own & (np.ceil(ratio_hi) > self.max_size)]
        suppressed[hopeless] = True
        code[hopeless] = -1

        coords, virtual_cols = self._points(data, persons)
        n_points = len(coords)
        order = zorder(coords)
        where = np.empty(n_points, dtype=np.int64)
        where[order] = np.arange(n_points)
        value = np.concatenate([code, np.full(n_points - data.n, -1, dtype=np.int64)])
        real = np.arange(n_points) < data.n
        special = ratio_hi > first_hi
        pos = where[pairs["row"][special]]
        by_pos = np.argsort(pos, kind="stable")
        req = Requirements(value=value[order], real=real[order], first=first_hi, pos=pos[by_pos],
                           code=pairs["code"][special][by_pos], ratio=ratio_hi[special][by_pos],
                           min_size=self.min_size, cap=self.max_size)
        grown = grow_groups(req)
        group = grown.group[where]
        suppressed |= grown.suppressed[where][: data.n]
        sizes = np.bincount(group[group >= 0], minlength=grown.n_groups)
        if suppressed.any() and not self.allow_suppression:
            raise PrivacyRefused(f"the global guarantee cannot be met for {int(suppressed.sum())} tuples "
                             "without suppressing their sensitive value (suppress = false)")

        info = {"suppressed": suppressed, "sizes": sizes, "virtual_group": group[data.n:],
                "virtual_columns": virtual_cols, "protected": protected,
                "release": next_release_number(data.extra or {})}
        part = Partition(group=group[: data.n].astype(np.int64), n_groups=grown.n_groups, info=info)
        self._check_requirements(data, part, np.where(suppressed, -1, code), pairs, num, den)
        return part

    def _points(self, data: Microdata, persons: pd.Index) -> tuple[np.ndarray, list[np.ndarray]]:
        """Coordinates of real tuples then virtual members, and the virtual members' QI columns."""
        real_cols = [data.frame[d.name].to_numpy(dtype=float) if d.kind == "numeric" else data.codes[:, j]
                     for j, d in enumerate(data.domains)]
        reg = (data.extra or {}).get("registration")
        virtual_cols = [np.zeros(0, dtype=c.dtype) for c in real_cols]
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
        columns = [np.concatenate([r, v]).astype(float) for r, v in zip(real_cols, virtual_cols)]
        return np.column_stack(columns), virtual_cols

    def _check_requirements(self, data, part, code, pairs, num, den) -> None:
        """Exact: |G| * den >= n(s) * num for every member and protected value of its group."""
        nv = len(data.sensitive_values)
        rows = st.release_rows(np.arange(data.n), part.group, part.info["sizes"], code,
                               np.arange(nv), 0)
        req_num = np.full(len(rows), self.strategy.first.numerator, dtype=object)
        req_den = np.full(len(rows), self.strategy.first.denominator, dtype=object)
        key = rows["person"].to_numpy(dtype=np.int64) * nv + rows["value"].to_numpy(dtype=np.int64)
        hist_key = pairs["row"] * nv + pairs["code"]
        at = pd.Index(hist_key).get_indexer(key)
        known = at >= 0
        req_num[known] = num[at[known]]
        req_den[known] = den[at[known]]
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
        tables = published_tables(part.group, sensitive, info["suppressed"], ds.sensitive, per_group,
                                  info["sizes"])
        person = data.frame[ds.person_id].to_numpy()
        code = np.where(info["suppressed"], -1, data.sensitive_codes).astype(np.int64)
        code[~np.isin(code, pd.Index(data.sensitive_values).get_indexer(info["protected"]))] = -1
        rows = st.release_rows(person, part.group, info["sizes"], code,
                               np.asarray(data.sensitive_values, dtype=object), info["release"])
        sizes = info["sizes"]
        n_virtual = int(sizes.sum() - data.n)
        return Release(
            tables=tables,
            private={
                "serial_stats": st.history_to_arrow(rows),
                "serial_aggregate": st.aggregate_to_arrow(st.update(prior_aggregate(data.extra or {}), rows)),
                "membership": pa.table({"person": pa.array(person), "gid": pa.array(part.group)}),
                "transient": list(info["protected"]),
                "release": info["release"],
            },
            info={
                "release": info["release"],
                "strategy": type(self.strategy).__name__,
                "groups": part.n_groups,
                "avg_group_size": float(sizes.mean()) if len(sizes) else 0.0,
                "max_group_size": int(sizes.max()) if len(sizes) else 0,
                "suppressed": int(info["suppressed"].sum()),
                "virtual_members": n_virtual,
            },
        )

    # --- verify: from the published tables, membership and the committed history -------------
    def verify(self, release: Release, context: dict[str, Any]) -> list[PrivacyResult]:
        ctx = context or {}
        check = sg.check_release(
            release.tables["table"], release.tables["groups"], release.private["membership"],
            prior_aggregate(ctx), l=self.l, sensitive=self.spec.dataset.sensitive,
            transient=release.private.get("transient"), release=release.private.get("release", 0))
        results = list(check.results)
        results.append(self._virtual_check(release, ctx))
        return results

    def _virtual_check(self, release: Release, ctx: dict[str, Any]) -> PrivacyResult:
        """Virtual members claimed in total <= registered people absent from the release."""
        groups = release.tables["groups"]
        claimed = int(np.sum(groups.column("size").to_numpy())) - release.tables["table"].num_rows
        reg = ctx.get("registration")
        absent = 0
        if reg is not None and len(reg):
            present = pd.Index(release.private["membership"].column("person").to_pandas())
            ids = pd.Index(reg[self.spec.dataset.person_id].drop_duplicates())
            absent = int((~ids.isin(present)).sum())
        return PrivacyResult("serial-virtual-members", claimed, absent, claimed <= absent)

    # --- utility: the shared count-query workload ----------------------------------------------
    def estimate_counts(self, release: Release, workload: Any) -> np.ndarray:
        """Uniformity inside each group's ranges and sets, as for generalization; suppressed
        (null) values never match a query's sensitive value."""
        from tasks.evaluate.estimate_generalized import estimate_from_generalized

        ds = self.spec.dataset
        return estimate_from_generalized(release.tables["table"], ds.qi_names, ds.sensitive, workload)

    def group_sizes(self, release: Release) -> np.ndarray:
        """Group sizes as published (virtual members included)."""
        return release.tables["groups"].column("size").to_numpy()

    def table_schemas(self, spec) -> dict[str, Any]:
        import pandera.pandas as pda

        from schemas.published import generalized_table_schema

        gid = pda.Column(int, pda.Check.ge(0), coerce=True)
        return {"table": generalized_table_schema(spec.dataset, extra={"gid": gid}, sensitive_nullable=True),
                "groups": pda.DataFrameSchema({"gid": pda.Column(int, pda.Check.ge(0), unique=True, coerce=True),
                                               "size": pda.Column(int, pda.Check.ge(1), coerce=True)},
                                              strict=True)}
