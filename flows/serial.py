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
    """Publish the next release of the serial series described by the spec (current snapshot);
    the parameters are the publish flow's."""
    return run_attempt(spec_path, overrides, actor, new_release, allow_repeat)
