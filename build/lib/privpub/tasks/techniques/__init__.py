"""Techniques as plug-ins: one folder per technique (or family) holding everything it owns,
each registering its classes with `@register` (tasks/core/technique.py).

`MODULES` says which module registers which technique, so a run imports only its own technique
(MuCo's module pulls in scipy.optimize, which a generalization run never needs). A name missing
here is still found: the registry then imports every folder's `technique` module.
"""

MODULES = {
    "generalization": "generalization.technique",
    "ambiguity": "ambiguity.technique",
    "priview": "ambiguity.priview",
    "muco": "muco.technique",
    "anatomy": "anatomy.technique",
    "butterfly": "butterfly.technique",
    "union-qid": "butterfly.technique",
    "serial": "serial.technique",
}
