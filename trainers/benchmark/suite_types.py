"""The types a benchmark suite is made of: a `Suite` (tasks, budget, seeds, preset, protocol) and its columns,
each a `Variant` (a method of `trainers.registry` plus extra CLI arguments, so ablations are suites too), and
the paper's own columns (`PAPER_METHODS`). The suites themselves are data: `trainers.benchmark.suites`."""

import dataclasses

from ..registry import ALGORITHMS, PROPOSED, get_algo
from .pretraining import Pretraining

PAPER_METHODS = ("gaussian_ppo", "dppo", "fpo", "genpo", "gsb_mdpo")
"""The paper's columns, named here and not derived from the registry, so that registering an algorithm changes
no suite and no committed verdict until a suite names it. PPO is the same-pipeline Gaussian PPO (the FPO
reference's PPO on Playground, FlowRL's on Gym-MuJoCo), not Stable-Baselines3."""


@dataclasses.dataclass(frozen=True)
class Variant:
    """One column of a suite's table."""

    name: str
    """Column name (the method name for plain methods, e.g. `gsb_mdpo:lambda=0` for ablations)."""
    method: str
    """The algorithm's name in `trainers.registry` (its trainer is `trainers.<method>`)."""
    args: tuple[str, ...] = ()
    """Extra CLI arguments for this variant only."""
    baseline: str = PROPOSED
    """The column this one is judged against in the generated verdicts (an ablation's control)."""
    preset: str | None = None
    """The preset this variant starts from instead of the suite's (a reference column's own tuned preset)."""
    shared_geometry: bool = True
    """Apply the suite's rollout geometry (`Suite.args`). False for a column whose preset fixes its own
    tuned geometry; the suite's evaluation (`Suite.eval_args`) applies to every column regardless."""
    tasks: tuple[str, ...] | None = None
    """The only tasks this column runs (None: every task of the suite), for a reference column whose preset
    covers only some."""

    def __post_init__(self):
        get_algo(self.method)  # a column of an unknown algorithm fails where the suite is defined

    @property
    def reference(self) -> bool:
        """A reference column: shown and compared, never one of the paper's columns (`PAPER_METHODS`), so it
        moves no claim."""
        return self.method not in PAPER_METHODS


@dataclasses.dataclass(frozen=True)
class Suite:
    name: str
    description: str
    tasks: tuple[str, ...]
    total_steps: int
    seeds: tuple[int, ...]
    preset: str
    """The preset every method starts from (each method's own column of the paper's table)."""
    variants: tuple[Variant, ...]
    args: tuple[str, ...] = ()
    """CLI overrides of the paper columns' rollout geometry (the CPU suites' smaller batches)."""
    eval_args: tuple[str, ...] = ()
    """CLI overrides of the evaluation, shared by every column (so every column is scored alike)."""
    eval_protocol: str = ""
    budget_note: str = ""
    pretraining: Pretraining | None = None
    """For a fine-tuning suite: the demonstrations and cloned policies its `{pretrained}` variants start from."""
    kind: str = "benchmark"
    """"benchmark" (returns tables and curves), "ablation" (adds the clip-fraction curve) or "compute"
    (the paper's Table 3: wall-clock and memory relative to same-pipeline Gaussian PPO)."""
    task_steps: tuple[tuple[str, int], ...] = ()
    """(task, env steps) for tasks whose budget is not `total_steps`."""
    floors: bool = False
    """Also score doing nothing (zero action) and uniformly random actions on every task
    (`trainers.benchmark.floors`), the floors the trained columns are read against."""
    task_seeds: tuple[tuple[str, tuple[int, ...]], ...] = ()
    """(task, seeds) for tasks that run only some of `seeds` (a confirmatory suite's per-task seed counts)."""

    def steps(self, task: str) -> int:
        """The env-step budget of one task."""
        return dict(self.task_steps).get(task, self.total_steps)

    def seeds_for(self, task: str) -> tuple[int, ...]:
        """The seeds one task runs."""
        return dict(self.task_seeds).get(task, self.seeds)

    def variant(self, name: str) -> Variant:
        for variant in self.variants:
            if variant.name == name:
                return variant
        raise KeyError(f"suite {self.name!r} has no method/variant {name!r}; it has {self.variant_names}")

    def runs(self, task: str, variant: Variant) -> bool:
        """Whether the suite runs this column on this task."""
        return variant.tasks is None or task in variant.tasks

    @property
    def planned_runs(self) -> int:
        return sum(len(self.seeds_for(t)) * self.runs(t, v) for t in self.tasks for v in self.variants)

    @property
    def variant_names(self) -> list[str]:
        return [v.name for v in self.variants]


def available_methods() -> list[str]:
    """The registered algorithms whose trainer module is present in this checkout."""
    return [algo.name for algo in ALGORITHMS if algo.available()]


def methods(*names: str) -> tuple[Variant, ...]:
    """Plain columns: one per named algorithm, named after it."""
    return tuple(Variant(name, name) for name in names)
