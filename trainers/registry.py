"""The one table of algorithms: every place that names an algorithm (suites, aggregation, claims, cards, the
trainers' command lines) reads it, so adding one is its trainer module plus one entry here.

Importing this module imports no trainer: an entry's presets are read from its module on first use, so
listing algorithms costs nothing (no JAX, torch or SB3 import, no compilation).
"""

import dataclasses
import importlib
import importlib.util

POLICY_KINDS = ("flow", "ddpm-flow", "gaussian", "coupling-flow")
"""What a trainer saves: gsbpolicy's flow policy (GSB-MDPO, FPO), the same flow with a DDPM
parameterization (DPPO), a Gaussian actor (both PPOs), GenPO's coupling flow. gsbpolicy's loader tells
three folder formats apart (flow, gaussian, genpo): a DDPM flow is a flow policy."""

LOAD_HINT = 'from gsbpolicy import GSBPolicy; GSBPolicy.from_pretrained("{}")'
"""Every kind loads with the one deployable loader."""


@dataclasses.dataclass(frozen=True)
class Algorithm:
    name: str
    """CLI and module name: `python -m trainers.<name>`, a suite variant's `method`, a run's `algo`."""
    label: str
    """The name tables and model cards print."""
    policy_kind: str
    """One of `POLICY_KINDS`."""
    reference: bool
    """A reference column (what a practitioner would use instead), not one of the paper's methods: shown
    for context, never part of the paper's claims."""
    load_hint: str = LOAD_HINT
    """How to load the saved policy, printed after training (`{}` is the policy folder)."""
    exact_resume: bool = True
    """A killed run resumed from its checkpoint computes what the uninterrupted run would have, bit for bit
    (SB3 keeps state a checkpoint does not capture, so its resumed runs only continue)."""

    def __post_init__(self):
        if self.policy_kind not in POLICY_KINDS:
            raise ValueError(f"{self.name}: policy kind {self.policy_kind!r} is not one of {POLICY_KINDS}")

    @property
    def module(self) -> str:
        return f"trainers.{self.name}"

    @property
    def presets(self) -> dict:
        """The trainer's PRESETS (imports the trainer module, with its training stack)."""
        return importlib.import_module(self.module).PRESETS

    def available(self) -> bool:
        """Whether the trainer module is present in this checkout (without importing it)."""
        return importlib.util.find_spec(self.module) is not None


ALGORITHMS = (
    Algorithm("gaussian_ppo", "Gaussian PPO", "gaussian", reference=False),
    Algorithm("ppo", "PPO (SB3)", "gaussian", reference=True, exact_resume=False),
    Algorithm("dppo", "DPPO", "ddpm-flow", reference=False),
    Algorithm("fpo", "FPO", "flow", reference=False),
    Algorithm("genpo", "GenPO", "coupling-flow", reference=False),
    Algorithm("gsb_mdpo", "GSB-MDPO", "flow", reference=False),
)
"""Every algorithm, in table order."""

PROPOSED = "gsb_mdpo"
"""The paper's method: the column every benchmark comparison has on one side."""

_BY_NAME = {algo.name: algo for algo in ALGORITHMS}


def names() -> tuple[str, ...]:
    """Every algorithm's name, in table order."""
    return tuple(_BY_NAME)


def paper_methods() -> tuple[str, ...]:
    """The paper's columns, in table order (reference columns left out)."""
    return tuple(algo.name for algo in ALGORITHMS if not algo.reference)


def get_algo(name: str) -> Algorithm:
    """The entry named `name`; a one-line error listing the valid names otherwise."""
    if name not in _BY_NAME:
        raise ValueError(f"unknown algorithm {name!r}; algorithms: {', '.join(_BY_NAME)}")
    return _BY_NAME[name]
