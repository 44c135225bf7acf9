"""The CLI's `audit` commands: the online auditor (l-uncertainty), flows/audit.py."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from privpub.flows import audit, run
from privpub.flows.attempts import current_actor
from privpub.flows.cli import quiet_tracebacks
from privpub.flows.cli_state import state_path
from privpub.flows.lazy import load_lazily
from privpub.flows.server import prefect_api
from privpub.schemas.errors import CliError
from privpub.schemas.spec import load_spec
from privpub.state.store import Store


def cmd_audit(args: argparse.Namespace) -> int:
    actor = current_actor(args.actor)
    if args.audit_command == "init":
        spec = load_spec(args.spec)
        name = audit.init_audit(spec, actor)
        print(json.dumps({"registered": name, "state": str(spec.state_path.resolve()), **audit.audit_settings(spec)}))
        return 0
    state = state_path(args)
    if args.audit_command == "set":
        print(json.dumps(audit.set_budget(state, args.table, args.budget, actor, args.request_budget)))
        return 0
    if args.audit_command == "ask":
        print(
            json.dumps(
                audit.ask(state, args.where, actor, args.table, ids=args.ids, spec_table=spec_table(args)), default=str
            )
        )
        return 0
    if args.audit_command == "batch":
        for response in decide_batch_here(args, state, actor):
            print(json.dumps(response, default=str))
        return 0
    print_log(Store(state), args.summary)
    return 0


def spec_table(args: argparse.Namespace) -> str | None:
    """The table a --spec registered (its dataset name): the one a request with --spec is for."""
    return load_spec(args.spec).dataset.name if getattr(args, "spec", None) else None


def decide_batch_here(args: argparse.Namespace, state: Path, actor: str) -> list[dict]:
    """A batch file's decisions, in this process with no Prefect, server or not; asked to
    (`--server`), a flow run of the configured or running server, as `publish --server` is
    (refused in one line when none answers)."""
    queries = read_batch(Path(args.file))
    table = audit.pick_table(Store(state), args.table, spec_table(args))
    if run.recording_server(getattr(args, "server", False)) is None:
        return audit.decide_batch(str(Path(state).resolve()), queries, actor, table, None, args.ids)
    call_flow = load_lazily("privpub.flows.publish:call_flow")  # Prefect only when a server is configured
    audit_flow = load_lazily("privpub.flows.audit_batch:audit_flow")
    with prefect_api() as ready:
        ready()
        quiet_tracebacks()
        responses: list[dict] = call_flow(
            audit_flow, state=str(Path(state).resolve()), queries=queries, actor=actor, table=table, ids=args.ids
        )
        return responses


def print_log(store: Store, summary: bool) -> None:
    """The auditor's decisions as JSON lines, or per table how many of each (--summary)."""
    log = store.audit_log()
    log = log[log.action.str.startswith("audit-")]
    if summary:
        for table in audit.summary(log):
            print(json.dumps(table))
        return
    for row in log.itertuples():
        print(
            json.dumps(
                {
                    "at": str(row.logged_at),
                    "requester": row.actor,
                    "action": row.action,
                    "table": row.target,
                    "response": row.outcome,
                    **json.loads(str(row.detail or "{}")),
                },
                default=str,
            )
        )


def read_batch(path: Path) -> list[dict]:
    """A batch file: one query per line, either a bare SQL predicate or a JSON object
    {"where": ..., "as": requester, "id": name}; blank lines and # comments are skipped."""
    if not path.is_file():
        raise CliError(f"batch file not found: {path}")
    queries = []
    for n, line in enumerate(path.read_text().splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("{"):
            try:
                q = json.loads(line)
            except json.JSONDecodeError as exc:
                raise CliError(f"{path}, line {n}: not valid JSON ({exc})") from None
            if "where" not in q:
                raise CliError(f'{path}, line {n}: a query needs a "where" predicate')
            queries.append(q)
        else:
            queries.append({"where": line})
    if not queries:
        raise CliError(f"{path} holds no query")
    return queries
