"""Errors that end a run with one clear message (no traceback needed), and the one-line text of
any error as users, logs and Prefect states see it."""

from __future__ import annotations


class PublishedTableError(ValueError):
    """A published table does not match its schema (a bug in a technique, never the user's)."""


def expected_errors() -> tuple[type[BaseException], ...]:
    """Errors whose message is written for the user: it names keys, rows and columns, never a
    person id or a secret value."""
    from privpub.flows.cluster import ClusterError
    from privpub.schemas.input import InputError
    from privpub.schemas.spec import SpecError
    from privpub.state.store import StaleHistory, StateBusy, StateError
    from privpub.tasks.core.technique import PrivacyRefused
    from privpub.tasks.partition.mondrian import PartitionError

    return (
        SpecError,
        InputError,
        PrivacyRefused,
        PublishedTableError,
        StateBusy,
        StateError,
        StaleHistory,
        PartitionError,
        CliError,
        ClusterError,
    )


class CliError(Exception):
    """A command used wrongly (a missing file named on the command line, ...)."""


def public_message(exc: BaseException) -> str:
    """One line. Any other error's message is not shown: it was not written for users and may
    quote data (a pandas KeyError quotes the key); its class says what kind of failure it was."""
    if isinstance(exc, expected_errors()):
        text = " ".join(str(exc).split())
        return text[:2000]
    return (
        f"internal error ({type(exc).__name__}); nothing was published by this run; "
        "set PRIVPUB_DEBUG=1 for the traceback"
    )
