"""Versioned schema migrations of the state database. Append, never edit an applied one.

A migration is SQL, or a function `(connection, state path)` for one that needs more than SQL
(migration 9 needs the pseudonym key, which lives in a file beside the state)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import duckdb

from privpub.state.chain import chain_existing
from privpub.state.pseudonyms import pseudonymise_state

Migration = str | Callable[[duckdb.DuckDBPyConnection, Path], bool]  # True: compact the file after (Store._compact)

MIGRATIONS: list[tuple[int, str, Migration]] = [
    (
        1,
        "releases, published tables, metrics, private metadata, audit log",
        """
CREATE TABLE release_rows (
    release_id        VARCHAR PRIMARY KEY,
    series            VARCHAR NOT NULL,
    sequence          INTEGER NOT NULL,
    technique         VARCHAR NOT NULL,
    parameters        JSON NOT NULL,
    spec              JSON NOT NULL,
    seed              UBIGINT NOT NULL,
    input_fingerprint VARCHAR NOT NULL,
    release_key       VARCHAR NOT NULL,
    status            VARCHAR NOT NULL,
    rows_in           BIGINT NOT NULL,
    output_dir        VARCHAR NOT NULL,
    staging_dir       VARCHAR NOT NULL,
    flow_run_id       VARCHAR,
    actor             VARCHAR,
    started_at        TIMESTAMP NOT NULL,
    created_at        TIMESTAMP NOT NULL,
    UNIQUE (series, sequence)
);
CREATE VIEW releases AS
    SELECT release_id, series, sequence, technique, status, seed, created_at, started_at,
           parameters, input_fingerprint, rows_in, output_dir, flow_run_id, actor
    FROM release_rows ORDER BY series, sequence;
CREATE TABLE release_tables (
    release_id VARCHAR NOT NULL,
    table_name VARCHAR NOT NULL,
    file       VARCHAR NOT NULL,
    n_rows     BIGINT NOT NULL,
    sha256     VARCHAR NOT NULL,
    PRIMARY KEY (release_id, table_name)
);
CREATE TABLE release_metrics (
    release_id VARCHAR NOT NULL,
    kind       VARCHAR NOT NULL,       -- privacy | utility
    name       VARCHAR NOT NULL,
    value      DOUBLE,
    text_value VARCHAR,                -- exact value (e.g. a fraction) as text
    threshold  VARCHAR,
    passed     BOOLEAN,
    detail     JSON,
    PRIMARY KEY (release_id, kind, name)
);
CREATE TABLE release_private (
    release_id VARCHAR NOT NULL,
    name       VARCHAR NOT NULL,
    format     VARCHAR NOT NULL,       -- parquet | json
    payload    BLOB NOT NULL,
    PRIMARY KEY (release_id, name)
);
CREATE SEQUENCE audit_seq;
CREATE TABLE audit_log (
    id          BIGINT PRIMARY KEY DEFAULT nextval('audit_seq'),
    logged_at   TIMESTAMP NOT NULL,
    actor       VARCHAR,
    action      VARCHAR NOT NULL,
    target      VARCHAR,
    outcome     VARCHAR NOT NULL,
    flow_run_id VARCHAR,
    detail      JSON
);
""",
    ),
    (
        2,
        "the online auditor's registered tables and knowledge dictionaries",
        """
CREATE TABLE audit_tables (
    name          VARCHAR PRIMARY KEY,   -- the dataset name of the registered secret table
    spec          JSON NOT NULL,
    fingerprint   VARCHAR NOT NULL,      -- sha256 of the secret input when registered
    knowledge     JSON NOT NULL,         -- Auditor.to_state(): the knowledge dictionary
    decisions     BIGINT NOT NULL,
    registered_at TIMESTAMP NOT NULL,
    updated_at    TIMESTAMP NOT NULL
);
""",
    ),
    (
        3,
        "serial statistics: the per-(person, value) aggregate and summary of each series",
        """
-- the Section 7 aggregate of a serial series, one row per (person, sensitive value) ever linked;
-- a release replaces only the pairs it names (delete + insert), in its commit transaction. No
-- PRIMARY KEY: maintaining its index made each upsert and checkpoint grow with the table
-- (1-6 s at 0.2-0.9 M pairs); uniqueness is kept by that delete + insert. person and value as
-- text (their types vary per series); q and d exact decimal integers (they outgrow HUGEINT);
-- p_hi a float upper bound of p = 1 - q/d; release_id the last release that changed the pair
CREATE TABLE serial_pairs (
    series     VARCHAR NOT NULL,
    person     VARCHAR NOT NULL,
    value      VARCHAR NOT NULL,
    links      BIGINT NOT NULL,
    q          VARCHAR NOT NULL,
    d          VARCHAR NOT NULL,
    p_hi       DOUBLE NOT NULL,
    release_id VARCHAR NOT NULL
);
-- pairs, pairs above 1/l and the worst pair of the series after its latest release
CREATE TABLE serial_summary (
    series     VARCHAR PRIMARY KEY,
    release_id VARCHAR NOT NULL,
    release    INTEGER NOT NULL,     -- that release's number in the series
    summary    JSON NOT NULL
);
""",
    ),
    (
        4,
        "serial statistics keyed by integers: serial_people, serial_values, serial_pairs (pkey, vkey)",
        """
-- dense integer keys per series for persons and values: every per-release join on serial_pairs
-- (the present people's pairs, the pairs a release names, the delete of their old state)
-- compares integers instead of text. Written only by the serial commit hook (one writer under
-- the state lock), which adds the keys of new persons and values; no PRIMARY KEY, as for
-- serial_pairs (index maintenance at every checkpoint would grow with the series)
CREATE TABLE serial_people (
    series VARCHAR NOT NULL,
    person VARCHAR NOT NULL,   -- the person id as text (CAST ... AS VARCHAR)
    pkey   BIGINT NOT NULL
);
CREATE TABLE serial_values (
    series VARCHAR NOT NULL,
    value  VARCHAR NOT NULL,   -- the sensitive value as text
    vkey   BIGINT NOT NULL
);
INSERT INTO serial_people
    SELECT series, person, row_number() OVER (PARTITION BY series ORDER BY person) - 1
    FROM (SELECT DISTINCT series, person FROM serial_pairs);
INSERT INTO serial_values
    SELECT series, value, row_number() OVER (PARTITION BY series ORDER BY value) - 1
    FROM (SELECT DISTINCT series, value FROM serial_pairs);
CREATE TABLE serial_pairs_keyed (
    series     VARCHAR NOT NULL,
    pkey       BIGINT NOT NULL,
    vkey       BIGINT NOT NULL,
    links      BIGINT NOT NULL,
    q          VARCHAR NOT NULL,
    d          VARCHAR NOT NULL,
    p_hi       DOUBLE NOT NULL,
    release_id VARCHAR NOT NULL
);
INSERT INTO serial_pairs_keyed
    SELECT p.series, k.pkey, v.vkey, p.links, p.q, p.d, p.p_hi, p.release_id
    FROM serial_pairs p JOIN serial_people k USING (series, person) JOIN serial_values v USING (series, value);
DROP TABLE serial_pairs;
ALTER TABLE serial_pairs_keyed RENAME TO serial_pairs;
""",
    ),
    (
        5,
        "serial history rows and group membership as rows, not per-release blobs",
        """
-- the Section 7 statistics file itself: one row per (person, value, release) where the person's
-- group held the value, and the group of every real tuple and virtual member of each release.
-- Rows rather than Parquet blobs in release_private: DuckDB rewrites a table's last row group
-- at every checkpoint, and release_private keeps all its blobs in one row group, so each commit
-- rewrote every earlier release's blobs and took longer as the series grew. These tables fill
-- row groups and leave them alone. Releases committed earlier keep their blobs.
CREATE TABLE serial_history (
    series     VARCHAR NOT NULL,
    release_id VARCHAR NOT NULL,
    release    INTEGER NOT NULL,     -- the release's number in the series
    pkey       BIGINT NOT NULL,
    vkey       BIGINT NOT NULL,
    size       BIGINT NOT NULL,      -- |G| counting virtual members
    count      BIGINT NOT NULL       -- n(s)
);
CREATE TABLE serial_membership (
    series     VARCHAR NOT NULL,
    release_id VARCHAR NOT NULL,
    pkey       BIGINT NOT NULL,
    gid        BIGINT NOT NULL,
    virtual    BOOLEAN NOT NULL      -- a registered absentee counted in the group (the witness)
);
-- the DuckDB types of the person ids and values, to give readers their own values back
CREATE TABLE serial_types (
    series      VARCHAR PRIMARY KEY,
    person_type VARCHAR NOT NULL,
    value_type  VARCHAR NOT NULL
);
""",
    ),
    (
        6,
        "attribution: what started each release (trigger, deployment, scheduled slot)",
        """
ALTER TABLE release_rows ADD COLUMN IF NOT EXISTS trigger VARCHAR;        -- cli | schedule | manual | retry | direct
ALTER TABLE release_rows ADD COLUMN IF NOT EXISTS deployment VARCHAR;
ALTER TABLE release_rows ADD COLUMN IF NOT EXISTS scheduled_for TIMESTAMP; -- the schedule's slot (scheduled runs)
CREATE OR REPLACE VIEW releases AS
    SELECT release_id, series, sequence, technique, status, seed, created_at, started_at,
           parameters, input_fingerprint, rows_in, output_dir, flow_run_id, actor,
           trigger, deployment, scheduled_for
    FROM release_rows ORDER BY series, sequence;
""",
    ),
    (
        7,
        "the series composition check: per-person summaries of what all releases say",
        """
-- What the adversary who holds every release knows about each person, kept so that a release
-- reads summaries instead of earlier inputs (tasks/compose/state.py). Owner-only like the file.
-- Series and values are small integers (sid, vkey) so the large tables hold integers only.
-- IF NOT EXISTS: re-applied safely to a state whose migration rows were rolled back by hand.
CREATE TABLE IF NOT EXISTS compose_head (
    series      VARCHAR PRIMARY KEY,
    sid         INTEGER NOT NULL,   -- the series' key in the tables below
    release_id  VARCHAR NOT NULL,   -- the latest release the summaries include
    release     INTEGER NOT NULL,
    next_pkey   BIGINT NOT NULL,
    next_set    BIGINT NOT NULL,
    next_cohort BIGINT NOT NULL,
    transient   VARCHAR NOT NULL    -- JSON: the transient values the summaries assume
);
CREATE TABLE IF NOT EXISTS compose_values (sid INTEGER NOT NULL, vkey INTEGER NOT NULL, value VARCHAR NOT NULL);
CREATE TABLE IF NOT EXISTS compose_people (
    sid     INTEGER NOT NULL,
    person  VARCHAR NOT NULL,   -- the person id as text
    pkey    BIGINT NOT NULL,    -- dense per series, for the membership rows
    set_id  BIGINT NOT NULL,    -- the person's summary in compose_sets / compose_set_info
    vkey    INTEGER NOT NULL,   -- the sensitive value in the person's latest release
    cohort  BIGINT NOT NULL,    -- the group the person keeps under [series] keep_groups
    release INTEGER NOT NULL    -- the person's latest release (its number in the series)
);
CREATE TABLE IF NOT EXISTS compose_sets (       -- the permanent values a summary still allows
    sid     INTEGER NOT NULL,
    set_id  BIGINT NOT NULL,
    vkey    INTEGER NOT NULL,
    minc    INTEGER NOT NULL      -- the fewest records holding it in one of the person's groups
);
CREATE TABLE IF NOT EXISTS compose_set_info (
    sid     INTEGER NOT NULL,
    set_id  BIGINT NOT NULL,
    min_t   INTEGER NOT NULL,     -- the fewest distinct transient values in one group (0: one held none)
    min_tc  INTEGER NOT NULL      -- the fewest records holding a transient value in one group
);
CREATE TABLE IF NOT EXISTS compose_membership ( -- each release's groups (never published)
    sid     INTEGER NOT NULL,
    release INTEGER NOT NULL,
    pkey    BIGINT NOT NULL,
    gid     BIGINT NOT NULL,
    vkey    INTEGER NOT NULL    -- the person's value in that release: the summaries can be rebuilt
);
""",
    ),
    (
        8,
        "no person id in published figures: the serial-global worst pair loses its person",
        """
-- Releases committed before this named the series' worst pair by its person id in the detail
-- that the report and `privpub history` show (issue 25). The id stays in serial_summary only.
UPDATE release_metrics SET detail = json_merge_patch(detail, '{"person": null}')
WHERE name = 'serial-global' AND json_exists(detail, '$.person');
""",
    ),
    (
        9,
        "person ids as keyed pseudonyms, the key kept apart from the state file",
        pseudonymise_state,
    ),
    (
        10,
        "the tamper-evident history: release rows, figures and audit rows chained by hash, manifests",
        chain_existing,  # every row already there chained as found: it proves nothing about edits before
    ),
    (
        11,
        "the privacy-budget ledger as a view over the DP releases' figures",
        """
-- One row per differentially private release (state/ledger.py, docs/dp.md): what it spent and the
-- series' total after it. A view over release_metrics, which the history chain covers: the ledger
-- has no rows of its own to edit apart from its releases'.
CREATE OR REPLACE VIEW privacy_ledger AS
    SELECT r.series, r.sequence, r.release_id, r.technique, r.created_at,
           TRY_CAST(max(m.text_value) FILTER (WHERE m.name = 'epsilon') AS DOUBLE) AS epsilon,
           coalesce(TRY_CAST(max(m.text_value) FILTER (WHERE m.name = 'delta') AS DOUBLE), 0) AS delta,
           TRY_CAST(max(m.text_value) FILTER (WHERE m.name = 'series-epsilon') AS DOUBLE) AS series_epsilon,
           TRY_CAST(max(m.text_value) FILTER (WHERE m.name = 'series-delta') AS DOUBLE) AS series_delta,
           TRY_CAST(max(m.threshold) FILTER (WHERE m.name = 'series-epsilon') AS DOUBLE) AS budget_epsilon,
           TRY_CAST(max(m.threshold) FILTER (WHERE m.name = 'series-delta') AS DOUBLE) AS budget_delta
    FROM release_rows r
    JOIN release_metrics m ON m.release_id = r.release_id AND m.kind = 'privacy'
         AND m.name IN ('epsilon', 'delta', 'series-epsilon', 'series-delta')
    GROUP BY r.series, r.sequence, r.release_id, r.technique, r.created_at
    ORDER BY r.series, r.sequence;
""",
    ),
]
