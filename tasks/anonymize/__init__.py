"""Techniques as plug-ins: one module per technique (or family), each registering its classes
with `@register` (tasks/anonymize/base.py).

`MODULES` says which module registers which technique, so a run imports only its own technique
(MuCo's module pulls in scipy.optimize, which a generalization run never needs). A name missing
here is still found: the registry then imports every module of this package.
"""

MODULES = {
    "generalization": "generalization",
    "ambiguity": "ambiguity",
    "priview": "priview",
    "muco": "muco",
    "anatomy": "anatomy",
    "butterfly": "butterfly",
    "union-qid": "butterfly",
    "serial": "serial",
}
