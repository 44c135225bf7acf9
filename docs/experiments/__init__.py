"""Experiment scripts whose output tables are written into the docs (not run by CI)."""
