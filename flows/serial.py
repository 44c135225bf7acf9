"""The `serial` flow: the next release of a series under the global guarantee.

The same pipeline as `publish`; the technique's prior_context() reads the series' statistics
from the store, and the commit refuses if another release of the series landed meanwhile.
"""

from __future__ import annotations

from prefect import flow

from privpub.flows.publish import run_attempt


@flow(name="serial", persist_result=False, validate_parameters=True)
def serial_flow(
    spec_path: str = "",
    overrides: dict | None = None,
    actor: str | None = None,
    new_release: bool = False,
    allow_repeat: bool = False,
):
    """Publish the next release of the serial series described by the spec (its current
    snapshot). Returns the release id.

    Args:
        spec_path: The serial series' TOML spec file (technique "serial"; see docs/series.md).
        overrides: Spec values merged over the file's, by section, e.g. {"technique": {"l": 5}}.
        actor: Who asks for the release, as the audit log records it (default: the deployment's name).
        new_release: Publish again although this run (a retry) or this scheduled slot already published a release.
        allow_repeat: Publish although the input and parameters equal those of the series' last release.
    """
    return run_attempt(spec_path, overrides, actor, new_release, allow_repeat)
