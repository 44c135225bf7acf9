"""Errors that end a run with one clear message (no traceback needed), and the one-line text of
any error as users, logs and Prefect states see it.

They live in the bottom layer so that every module may raise them without importing the layer
that defines the step (import-linter's layers contract, pyproject.toml)."""

from __future__ import annotations


class SpecError(ValueError):
    """A spec that cannot be used; the message says which key and why."""


class InputError(ValueError):
    """The input cannot be published as it is; the message says where and why. It names rows by
    position and columns by name, never a person id or a cell's value (both are secret)."""


class PrivacyRefused(RuntimeError):
    """The release cannot meet its privacy model: nothing is published."""


class PublishedTableError(ValueError):
    """A published table does not match its schema (a bug in a technique, never the user's)."""


class StateBusy(RuntimeError):
    """Another process holds the state file longer than we are willing to wait."""


class StaleHistory(RuntimeError):
    """The series' history changed between reading it and committing."""


class StateError(RuntimeError):
    """The state database does not hold what was asked for."""


class PartitionError(ValueError):
    """The data cannot meet the requested k / l at all."""


class CliError(Exception):
    """A command used wrongly (a missing file named on the command line, ...)."""


class ClusterError(RuntimeError):
    """The Dask cluster cannot be used as [run] asks (unreachable, or it would spill secrets)."""


# Errors whose message is written for the user: it names keys, rows and columns, never a person
# id or a secret value.
EXPECTED_ERRORS: tuple[type[BaseException], ...] = (
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


def public_message(exc: BaseException) -> str:
    """One line. Any other error's message is not shown: it was not written for users and may
    quote data (a pandas KeyError quotes the key); its class says what kind of failure it was."""
    if isinstance(exc, EXPECTED_ERRORS):
        text = " ".join(str(exc).split())
        return text[:2000]
    return (
        f"internal error ({type(exc).__name__}); nothing was published by this run; "
        "set PRIVPUB_DEBUG=1 for the traceback"
    )
