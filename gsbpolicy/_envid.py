"""Which simulator an env id names: the one rule every part of the project uses to tell them apart (the
exporter's robot contract, the trainers' env backends, the cards), so it lives in the library ring."""

import re
from typing import Literal

EnvKind = Literal["gymnasium", "playground"]

_GYMNASIUM_ID = re.compile(r"^(?:[\w.]+:)?(?:[\w.-]+/)?[\w.-]+-v\d+$")
"""Gymnasium's id grammar: optional "module:" prefix, optional "namespace/", a name, then "-v<version>"."""


def env_kind(env_id: str) -> EnvKind:
    """ "gymnasium" for a versioned Gymnasium id ("Hopper-v5", "my_pkg.envs:Reach-v0"), "playground" for
    anything else (a MuJoCo Playground task name such as "CartpoleSwingup", which never carries a version).

    Only the form of the id is read: whether the env exists is checked where it is made.
    """
    return "gymnasium" if _GYMNASIUM_ID.match(env_id) else "playground"
