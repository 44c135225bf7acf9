"""Errors that end a run with one clear message (no traceback needed)."""
from __future__ import annotations


class PrivacyRefused(RuntimeError):
    """The verifier found the release does not meet its privacy model: nothing is published."""


class PublishedTableError(ValueError):
    """A published table does not match its schema (a bug in a technique, never the user's)."""
