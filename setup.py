"""The package list, computed from the folders (pyproject.toml holds everything else): `privpub`
is flows/privpub/, `privpub.<folder>.<...>` every folder below the top-level ones that holds an
__init__.py. Adding a technique folder touches nothing here (issue 40)."""

from pathlib import Path

from setuptools import setup

ROOT = Path(__file__).resolve().parent
FOLDERS = ("flows", "tasks", "schemas", "state", "deployments")


def packages() -> list[str]:
    found = {"privpub"}
    for folder in FOLDERS:
        for init in (ROOT / folder).rglob("__init__.py"):
            if init.parent != ROOT / "flows" / "privpub":  # the root package itself
                found.add("privpub." + ".".join(init.parent.relative_to(ROOT).parts))
    return sorted(found)


if __name__ == "__main__":
    setup(packages=packages())
