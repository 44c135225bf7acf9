"""Versioned schema migrations of the state database. Append, never edit an applied one."""
from __future__ import annotations

MIGRATIONS: list[tuple[int, str, str]] = [
    (1, "releases, published tables, metrics, private metadata, audit log", """
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
"""),
    (2, "the online auditor's registered tables and knowledge dictionaries", """
CREATE TABLE audit_tables (
    name          VARCHAR PRIMARY KEY,   -- the dataset name of the registered secret table
    spec          JSON NOT NULL,
    fingerprint   VARCHAR NOT NULL,      -- sha256 of the secret input when registered
    knowledge     JSON NOT NULL,         -- Auditor.to_state(): the knowledge dictionary
    decisions     BIGINT NOT NULL,
    registered_at TIMESTAMP NOT NULL,
    updated_at    TIMESTAMP NOT NULL
);
"""),
    (3, "serial statistics: the per-(person, value) aggregate and summary of each series", """
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
"""),
]
