"""Ambiguity and PriView (alpha-presence, beta-association): two techniques in one folder."""

# the modules whose import registers this folder's techniques (tasks/techniques/registry.py)
TECHNIQUE_MODULES = ("technique", "priview")
