"""Techniques as plug-ins: one folder per technique (or family) holding everything it owns,
each registering its classes with `@register` (tasks/techniques/registry.py). The folders are
independent of each other (import-linter's independence contract, pyproject.toml)."""
