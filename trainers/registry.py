"""The one table of algorithms: every place that names an algorithm (the benchmark runner, aggregation, cards,
the trainers' command lines, the contract tests) reads it, so adding one is its trainer module plus one entry
here. Which algorithms are the paper's columns is not a property of an algorithm but of a suite
(`trainers.benchmark.suites.PAPER_METHODS`): registering one changes no suite and no committed verdict.

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


@dataclasses.dataclass(frozen=True)
class Algorithm:
    name: str
    """The algorithm's id: a run's `algo`, a suite variant's `method`, and by default its module's name."""
    label: str
    """The name tables and model cards print."""
    policy_kind: str
    """One of `POLICY_KINDS`."""
    exact_resume: bool = True
    """A killed run resumed from its checkpoint computes what the uninterrupted run would have, bit for bit
    (SB3 keeps state a checkpoint does not capture, so its resumed runs only continue)."""
    module: str = ""
    """The trainer module (`python -m <module>`); default `trainers.<name>`."""
    vmapped_seeds: bool = True
    """Its trainer's `--seeds` trains several seeds in one process, the iteration vmapped over them (the
    shared JAX loop), so the benchmark runner may group a task's seeds (`--group-seeds`); SB3's PPO trains
    one seed a process."""

    def __post_init__(self):
        if self.policy_kind not in POLICY_KINDS:
            raise ValueError(f"{self.name}: policy kind {self.policy_kind!r} is not one of {POLICY_KINDS}")
        if not self.module:
            object.__setattr__(self, "module", f"trainers.{self.name}")

    @property
    def presets(self) -> dict:
        """The trainer's PRESETS (imports the trainer module, with its training stack)."""
        return importlib.import_module(self.module).PRESETS

    def available(self) -> bool:
        """Whether the trainer module is present in this checkout (without importing it)."""
        return importlib.util.find_spec(self.module) is not None


ALGORITHMS = [
    Algorithm("gaussian_ppo", "Gaussian PPO", "gaussian"),
    Algorithm("ppo", "PPO (SB3)", "gaussian", exact_resume=False, vmapped_seeds=False),
    Algorithm("dppo", "DPPO", "ddpm-flow"),
    Algorithm("fpo", "FPO", "flow"),
    Algorithm("fpo_pp", "FPO++", "flow"),
    Algorithm("genpo", "GenPO", "coupling-flow"),
    Algorithm("gsb_mdpo", "GSB-MDPO", "flow"),
]
"""Every algorithm, in table order."""

PROPOSED = "gsb_mdpo"
"""The paper's method: the column every benchmark comparison has on one side."""


def register(algo: Algorithm) -> None:
    """Add `algo` to the table (an algorithm defined outside this repository, or in a test); its name must be
    new."""
    if any(known.name == algo.name for known in ALGORITHMS):
        raise ValueError(f"an algorithm named {algo.name!r} is already registered")
    ALGORITHMS.append(algo)


def unregister(name: str) -> None:
    """Remove the algorithm `register` added under `name`."""
    ALGORITHMS.remove(get_algo(name))


def names() -> tuple[str, ...]:
    """Every algorithm's name, in table order."""
    return tuple(algo.name for algo in ALGORITHMS)


def get_algo(name: str) -> Algorithm:
    """The entry named `name`; a one-line error listing the valid names otherwise."""
    for algo in ALGORITHMS:
        if algo.name == name:
            return algo
    raise ValueError(f"unknown algorithm {name!r}; algorithms: {', '.join(names())}")
