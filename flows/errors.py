"""Errors that end a run with one clear message (no traceback needed)."""
from __future__ import annotations


from tasks.anonymize.base import PrivacyRefused  # noqa: F401  (raised by tasks, caught by flows)


class PublishedTableError(ValueError):
    """A published table does not match its schema (a bug in a technique, never the user's)."""
