"""Benchmark suites as data: tasks, budget, seeds, the preset each method starts from, overrides, protocol.

A suite run is (task x variant x seed). A *variant* is a method (an algorithm of `trainers.registry`) plus
extra CLI arguments, so ablations are suites too. `python -m trainers.benchmark --suite NAME` runs one.

The paper suites reproduce Tables 1-2 exactly (each method's own column, the shared rollout rows) and need
GPUs. The CPU suites keep each method's paper column (networks, learning rates, algorithm coefficients)
and shrink only the rollout geometry and the budget, so that one method x task x seed fits in about
30 minutes on a 2-core CPU; `budget_note` says how the budget was chosen.
"""

import dataclasses
import json
from pathlib import Path

from ..registry import ALGORITHMS, PROPOSED, get_algo
from .pretraining import PRETRAINED, Pretraining

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


def _methods(*names: str) -> tuple[Variant, ...]:
    return tuple(Variant(name, name) for name in names)


PLAYGROUND_PROTOCOL = (
    "128 fresh envs x one 1000-step episode, deterministic (ODE / Gaussian mean), 10 evaluations"
)
GYM_PROTOCOL = "10 episodes in a vector env, deterministic (ODE / Gaussian mean), every 1M env steps"

# CPU geometry for Gymnasium tasks: 32 envs x 64 steps = 2048 transitions, 4 minibatches x 512, 4 epochs.
# The update's cost per env step (epochs x forward/backward per sample) is the paper's; only the batch is
# smaller, which gives more iterations per env step at this budget.
_CPU_GYM_GEOMETRY = ("--rollout.num-envs", "32", "--rollout.unroll-length", "64", "--rollout.num-minibatches", "4",
                     "--rollout.epochs", "4")  # fmt: skip
_CPU_GYM_TASKS = ("Hopper-v5", "HalfCheetah-v5", "Walker2d-v5", "Swimmer-v5")
# Tuned SB3 PPO as a reference column: its own preset and geometry, the suite's evaluation.
_ZOO_COLUMN = Variant("sb3_ppo:zoo", "ppo", preset="zoo", shared_geometry=False)
# FPO++ as a reference column: its preset (FlowRL's column on Gym, Table 1's FPO column with FPO++'s objective
# on Playground) in the suite's geometry, like a paper column, but judged only against GSB-MDPO.
_FPO_PP_COLUMN = Variant("fpo_pp", "fpo_pp")
_CPU_GYM_EVAL = ("--eval.interval-steps", "0", "--eval.num-evals", "10")
_CPU_GYM_PROTOCOL = "10 episodes in a vector env, deterministic (ODE / Gaussian mean), 10 evaluations"
"""What `_CPU_GYM_EVAL` gives every column of the CPU Gymnasium suites."""
# The paper's Gym run counted in gradient updates: 40M env steps in iterations of 1024 envs x 24 steps (1,628 of
# them, rounded up as the trainers round), each 4 epochs x 4 minibatches = 16 updates, as cpu-gym's are.
PAPER_GYM_ITERATIONS = -(-40_000_000 // (1024 * 24))
_CPU_GYM_STEPS_PER_ITERATION = 32 * 64
PAPER_UPDATES_ARGS = ("--optim.cosine-decay-steps", str(PAPER_GYM_ITERATIONS * _CPU_GYM_STEPS_PER_ITERATION))
"""GSB-MDPO's cosine laid out over the paper's number of gradient updates in cpu-gym's geometry (3,334,144 env
steps): at every update its learning rate is the paper's run's at the same update; a 1M-step run stops after
489 of the 1,628 iterations, 30% of the way, at 79% of the peak rate (cpu-gym's own run has decayed to 0)."""
# CPU geometry for Playground tasks: 256 envs x 30 steps x 4 unrolls, 8 minibatches of 128 sequences, 16 epochs.
_CPU_PLAYGROUND_GEOMETRY = ("--rollout.num-envs", "256", "--rollout.unrolls-per-iteration", "4",
                            "--rollout.num-minibatches", "8", "--eval.num-envs", "32")  # fmt: skip

# The fine-tuning suite's policy: GSB-MDPO's Table 2 column (`trainers.gsb_mdpo.gym_preset`; a test checks
# these flags against it), which behaviour cloning fits and every fine-tuning column then trains.
_GSB_GYM_POLICY = ("--policy.num-steps", "16", "--policy.width", "256", "--policy.depth", "3",
                   "--policy.activation", "silu", "--policy.time-embedding", "fourier", "--policy.time-embed-dim", "16",
                   "--policy.output-scale", "0.25", "--policy.sigma-schedule", "linear", "--policy.sigma-max", "3.0",
                   "--policy.sigma-min", "0.3", "--policy.squash", "clip")  # fmt: skip
_FINETUNE_STEPS = 100_000
_FINETUNE = ("--init-from", PRETRAINED, "--init.critic-warmup-steps", "8192")
"""Fine-tuning: start from the seed's cloned policy; 4 iterations of critic warm-up before the actor moves."""


_SMALL = "trainers.benchmark.small_envs:"
"""Gymnasium imports this module (registering its envs) for the ids that start with it."""
_SMALL_EVAL = ("--eval.interval-steps", "0", "--eval.num-evals", "10", "--eval.episodes", "20",
               "--eval.final-episodes", "50")  # fmt: skip
_SMALL_PROTOCOL = "20 episodes in a vector env, deterministic (ODE / Gaussian mean), 10 evaluations; the final return over 50 episodes"
"""The evaluation of the suites that read a default against SB3 PPO's (small-envs, gym-continuous)."""
# gym-continuous's budgets, fixed before any of its runs: rl-baselines3-zoo's PPO budget (hyperparams/ppo.yml)
# where the zoo tunes PPO for the task without gSDE, else the budget at which SB3 PPO's defaults have a clear
# result (measured, or the zoo's MuJoCo budget).
_GYM_CONTINUOUS_STEPS = (
    # The zoo: 1M (16 envs); SB3's defaults were at 171 and 173 after 200k steps (two seeds; doing nothing -137).
    ("LunarLanderContinuous-v3", 1_000_000),
    # The zoo: 5M (32 envs, normalised): a walking gait takes millions of steps, falls cost -100.
    ("BipedalWalker-v3", 5_000_000),
    # The zoo's Reacher entry: 1M; at 100k SB3's defaults were at -11.9 and -20.4, no better than doing nothing (-11.7).
    ("Reacher-v5", 1_000_000),
    # No zoo PPO entry: the zoo's 1M of every tuned MuJoCo PPO task.
    ("Pusher-v5", 1_000_000),
    # The zoo's 100k needs gSDE (its entry is tuned with it); SB3's defaults had not started at 100k (small-envs:
    # -1,127, doing nothing -1,213), so ten times that.
    ("Pendulum-v1", 1_000_000),
    # The zoo's 20k needs gSDE; at small-envs' 50k SB3's defaults already reach 93 (doing nothing 0).
    ("MountainCarContinuous-v0", 50_000),
)
_FINETUNE_PRETRAINING = Pretraining(
    demonstrator="gaussian_ppo",
    demonstrator_steps=200_000,
    episodes=30,
    action_noise=0.1,
    bc_args=(*_GSB_GYM_POLICY, "--steps", "5000"),
)


def _finetune_variants() -> tuple[Variant, ...]:
    # FPO's and DPPO's Table 2 columns train other samplers (FPO: noise-free Euler with clipped iterates;
    # DPPO: the DDPM chain). Starting from the same cloned policy means training its sampler: their own
    # coefficients and learning rates, GSB-MDPO's policy spec (`--init-from` refuses any other).
    return (
        # The cloned policy scored under the same protocol: the critic learns, the actor's network never trains
        # (its observation normaliser follows the rollouts' running statistics, as in every run)
        # (one epoch per iteration, as nothing else depends on it).
        Variant(
            "bc",
            "gsb_mdpo",
            (
                "--init-from",
                PRETRAINED,
                "--init.critic-warmup-steps",
                str(_FINETUNE_STEPS),
                "--rollout.epochs",
                "1",
            ),
        ),
        Variant("gsb_mdpo", "gsb_mdpo", _FINETUNE),
        Variant("gsb_mdpo:lambda=0", "gsb_mdpo", (*_FINETUNE, "--algo.kl-coef", "0")),
        Variant("gsb_mdpo:lambda=0.8", "gsb_mdpo", (*_FINETUNE, "--algo.kl-coef", "0.8")),
        Variant("fpo", "fpo", (*_FINETUNE, *_GSB_GYM_POLICY, "--algo.no-clip-iterates")),
        Variant("dppo", "dppo", (*_FINETUNE, *_GSB_GYM_POLICY, "--algo.no-time-reversed", "--algo.no-ddpm")),
        Variant("gsb_mdpo:scratch", "gsb_mdpo"),
        # The demonstrator's recipe rerun for its steps plus the fine-tuning budget: Gaussian PPO from scratch
        # (a later --total-steps wins over the runner's), same preset, geometry and seeds 0-2. It does not resume
        # the demonstrator's own run (its folder is not kept): the committed seed 0, run on another machine and
        # commit, follows another curve, so the page calls the column the recipe rerun.
        Variant(
            "gaussian_ppo:demonstrator-continued",
            "gaussian_ppo",
            ("--total-steps", str(_FINETUNE_PRETRAINING.demonstrator_steps + _FINETUNE_STEPS)),
        ),
    )


SUITES: dict[str, Suite] = {
    s.name: s
    for s in (
        Suite(
            name="paper-playground",
            description="Paper Table 1: eight MuJoCo Playground tasks. The paper names seven; CartpoleSwingup "
            "is our choice for the eighth.",
            tasks=(
                "BallInCup",
                "CheetahRun",
                "FingerSpin",
                "FingerTurnEasy",
                "FingerTurnHard",
                "ReacherEasy",
                "ReacherHard",
                "CartpoleSwingup",
            ),
            total_steps=60_000_000,
            seeds=(0, 1, 2, 3, 4),
            preset="playground",
            variants=_methods(*PAPER_METHODS),
            eval_protocol=PLAYGROUND_PROTOCOL,
            budget_note="the paper's budget; needs a GPU",
        ),
        Suite(
            name="paper-gym",
            description="Paper Table 2: six Gymnasium MuJoCo v5 tasks.",
            tasks=("Ant-v5", "HalfCheetah-v5", "Hopper-v5", "Humanoid-v5", "Swimmer-v5", "Walker2d-v5"),
            total_steps=40_000_000,
            seeds=(0, 1, 2, 3, 4),
            preset="gym",
            variants=_methods(*PAPER_METHODS),
            eval_protocol=GYM_PROTOCOL,
            budget_note="the paper's budget; needs a GPU",
        ),
        Suite(
            name="cpu-gym",
            description="Four Gymnasium MuJoCo v5 tasks on a 2-core CPU; each method's Table 2 column with a "
            "smaller rollout geometry, both published forms of FPO and DPPO, and FPO++ and tuned SB3 PPO for "
            "reference.",
            tasks=_CPU_GYM_TASKS,
            total_steps=1_000_000,
            seeds=(0, 1, 2),
            preset="gym",
            variants=(
                *_methods("gaussian_ppo", "dppo"),
                Variant("dppo:clamp-mean", "dppo", ("--algo.no-log-prob-clamp-per-dim",)),
                Variant("fpo", "fpo"),
                Variant("fpo:flowrl", "fpo", ("--algo.positive-advantages-only",)),
                *_methods("genpo", "gsb_mdpo"),
                _FPO_PP_COLUMN,
                _ZOO_COLUMN,
            ),
            args=_CPU_GYM_GEOMETRY,
            eval_args=_CPU_GYM_EVAL,
            eval_protocol=_CPU_GYM_PROTOCOL,
            budget_note="1M env steps: 1/40 of the paper's budget, sized so that one run of every method but "
            "GenPO takes <= 30 min on 2 cores (the per-task cost table below gives the measured minutes); GenPO's "
            "two-network coupling flow costs several times GSB-MDPO's per step (compute-cpu), so its runs take longer. `fpo` is the FPO paper's surrogate (both advantage signs), "
            "`fpo:flowrl` FlowRL's positive-advantages-only form; `dppo` clamps each action dimension's "
            "log-density before averaging (official DPPO), `dppo:clamp-mean` clamps the average; `fpo_pp` is FPO++ "
            "(FlowRL's column: 64 flow steps and 16 flow-matching draws per action, so its runs cost more than "
            "FPO's and, like the zoo column's, fall outside that sizing; a reference column, not a paper method); `sb3_ppo:zoo` is Stable-Baselines3 PPO with rl-baselines3-zoo's tuned hyperparameters and geometry (a reference "
            "column, not a paper method, and outside that sizing: its one-env geometry's many small updates cost "
            "more per env step, so its slowest task takes longer)",
        ),
        Suite(
            name="cpu-playground",
            description="Five MuJoCo Playground tasks on a 2-core CPU (three of the four where the paper claims "
            "clear gains: FingerSpin, BallInCup and FingerTurnEasy); each method's Table 1 column with a smaller "
            "rollout geometry, and FPO++ (Table 1's FPO column with FPO++'s objective) for reference.",
            # FingerTurnHard, the fourth, is left to the GPU suite: it is FingerTurnEasy's model and sparse reward
            # (1 only while the tip is inside the target) with a smaller target (radius 0.03 against 0.07), so it
            # would cost as many CPU hours for a rarer signal.
            tasks=("CartpoleSwingup", "ReacherEasy", "FingerSpin", "BallInCup", "FingerTurnEasy"),
            total_steps=3_000_000,
            seeds=(0, 1, 2),
            preset="playground",
            variants=(*_methods(*PAPER_METHODS), _FPO_PP_COLUMN),
            args=_CPU_PLAYGROUND_GEOMETRY,
            eval_protocol="32 fresh envs x one 1000-step episode, deterministic (ODE / Gaussian mean), 10 evaluations",
            budget_note="3M env steps: 1/20 of the paper's budget, sized so that one run of every method but GenPO "
            "takes about 30 min on 2 cores; the per-task cost tables below give each run's measured minutes (the "
            "fastest run: runs that shared the machine took longer). Some runs ran on a GPU machine: the hardware "
            "line counts them, and each machine has its own cost table",
        ),
        Suite(
            name="ablation-cpu",
            description="Paper Section 5.3 ablations of GSB-MDPO on HalfCheetah-v5, the paper's ablation task "
            "(Table 2 column, CPU geometry). As in the paper, the path-KL and clipping ablations switch off "
            "reference mixing too and are compared with eta=0. Deterministic-ODE vs stochastic evaluation is "
            "read from every run's evaluations.",
            tasks=("HalfCheetah-v5",),
            total_steps=1_000_000,
            seeds=(0, 1, 2),
            preset="gym",
            variants=(
                Variant("gsb_mdpo", "gsb_mdpo"),
                Variant("eta=0", "gsb_mdpo", ("--algo.ref-mix", "0")),
                Variant(
                    "lambda=0,eta=0", "gsb_mdpo", ("--algo.kl-coef", "0", "--algo.ref-mix", "0"), "eta=0"
                ),
                Variant(
                    "no clip,eta=0",
                    "gsb_mdpo",
                    ("--algo.step-clip", "1e9", "--algo.path-clip", "1e9", "--algo.ref-mix", "0"),
                    "eta=0",
                ),
                Variant("N=4", "gsb_mdpo", ("--policy.num-steps", "4")),
                Variant("N=8", "gsb_mdpo", ("--policy.num-steps", "8")),
                Variant("N=32", "gsb_mdpo", ("--policy.num-steps", "32")),
            ),
            args=_CPU_GYM_GEOMETRY,
            eval_args=_CPU_GYM_EVAL,
            eval_protocol="10 episodes, deterministic ODE and stochastic SDE at each of 10 evaluations",
            budget_note="1M env steps, as cpu-gym (the paper: 40M steps, 2 seeds); the default variant has "
            "N=16 generation steps and is cpu-gym's GSB-MDPO run",
            kind="ablation",
        ),
        Suite(
            name="lr-schedule-cpu-gym",
            description="Why GSB-MDPO trails Gaussian PPO on Walker2d-v5 in cpu-gym: GSB-MDPO's Table 2 column "
            "decays its actor learning rate to 0 with a cosine over the run (Gaussian PPO's stays constant). Over "
            "the paper's 40M steps the first 1M keep that rate within 0.2% of its peak; over cpu-gym's 1M it "
            "reaches 0. `gsb_mdpo:paper-lr` keeps the rate the paper's schedule has over its first 1M steps (the "
            "peak, constant); `gsb_mdpo` and `gaussian_ppo` are cpu-gym's runs, and Gaussian PPO is judged "
            "against `gsb_mdpo:paper-lr`.",
            tasks=("Walker2d-v5",),
            total_steps=1_000_000,
            seeds=(0, 1, 2),
            preset="gym",
            variants=(
                Variant("gsb_mdpo", "gsb_mdpo"),
                # cos(pi/2 * 1M/40M)^2 = 0.9985: the paper's cosine over 40M steps, during its first 1M.
                Variant("gsb_mdpo:paper-lr", "gsb_mdpo", ("--optim.no-actor-cosine-decay",)),
                Variant("gaussian_ppo", "gaussian_ppo", baseline="gsb_mdpo:paper-lr"),
            ),
            args=_CPU_GYM_GEOMETRY,
            eval_args=_CPU_GYM_EVAL,
            eval_protocol=_CPU_GYM_PROTOCOL,
            budget_note="1M env steps, as cpu-gym",
            kind="ablation",
        ),
        Suite(
            name="walker2d-causes-cpu-gym",
            description="Why GSB-MDPO trails Gaussian PPO on Walker2d-v5 in cpu-gym: the cheapest runs that "
            "separate three causes. The schedule: `gaussian_ppo:cosine-lr` gives Gaussian PPO GSB-MDPO's cosine "
            "decay of the actor's rate to 0 over the run (judged against `gaussian_ppo`). The budget in updates: "
            "`gsb_mdpo:paper-updates` lays its cosine out over the paper's number of gradient updates (1,628 "
            "iterations of 16) and is read at 1M env steps, 30% of the way, where the paper's run has the same "
            "rate. The sampler: Table 2's (sigma from 3.0 to 0.3 over 16 steps, a^(0) ~ N(0, 1)) gives an untrained "
            "policy an action std of about 2.2, so about 64% of action coordinates start beyond the clip at +-1; "
            "`gsb_mdpo:sigma-max=1` starts at about 1.2 (41%). `gsb_mdpo` and `gaussian_ppo` are cpu-gym's runs; "
            "the GSB-MDPO variants are judged against `gsb_mdpo`.",
            tasks=("Walker2d-v5",),
            total_steps=1_000_000,
            seeds=(0, 1, 2),
            preset="gym",
            variants=(
                Variant("gsb_mdpo", "gsb_mdpo"),
                Variant("gaussian_ppo", "gaussian_ppo"),
                Variant(
                    "gaussian_ppo:cosine-lr", "gaussian_ppo", ("--optim.actor-cosine-decay",), "gaussian_ppo"
                ),
                Variant("gsb_mdpo:sigma-max=1", "gsb_mdpo", ("--policy.sigma-max", "1.0")),
                Variant("gsb_mdpo:paper-updates", "gsb_mdpo", PAPER_UPDATES_ARGS),
            ),
            args=_CPU_GYM_GEOMETRY,
            eval_args=_CPU_GYM_EVAL,
            eval_protocol=_CPU_GYM_PROTOCOL,
            budget_note="1M env steps, as cpu-gym",
            kind="ablation",
        ),
        Suite(
            name="clip-fraction-cpu-gym",
            description="The paper's App. C.2 clip-fraction diagnostic on HalfCheetah-v5: `gsb_mdpo:paper-updates` "
            "lays GSB-MDPO's cosine out over the paper's number of gradient updates, so at each update its rate is "
            "the paper's run's, and logs the share of rollout samples with a clipped step (what App. C.2 counts); "
            "`gsb_mdpo` is cpu-gym's run, whose cosine spans its own 1M steps (its rate reaches 0), for the "
            "schedule's effect.",
            tasks=("HalfCheetah-v5",),
            total_steps=1_000_000,
            seeds=(0, 1, 2),
            preset="gym",
            variants=(
                Variant("gsb_mdpo", "gsb_mdpo"),
                Variant("gsb_mdpo:paper-updates", "gsb_mdpo", PAPER_UPDATES_ARGS),
            ),
            args=_CPU_GYM_GEOMETRY,
            eval_args=_CPU_GYM_EVAL,
            eval_protocol=_CPU_GYM_PROTOCOL,
            budget_note="1M env steps, as cpu-gym (the paper's figure: 40M steps, 2 seeds)",
            kind="ablation",
        ),
        Suite(
            name="zoo-geometry-cpu-gym",
            description="Where tuned SB3 PPO's edge over the paper's columns comes from: rl-baselines3-zoo's "
            "geometry (one env, 512-2048 steps per update, 5-20 epochs of 32-64-transition minibatches: 20-80 times "
            "cpu-gym's gradient steps per env step) or the rest of its preset. `sb3_ppo:zoo,cpu-geometry` keeps every zoo "
            "hyperparameter but trains in cpu-gym's geometry and is judged against `sb3_ppo:zoo`; `sb3_ppo:zoo`, "
            "`gaussian_ppo` and `gsb_mdpo` are cpu-gym's runs, judged against `gsb_mdpo`.",
            tasks=_CPU_GYM_TASKS,
            total_steps=1_000_000,
            seeds=(0, 1, 2),
            preset="gym",
            variants=(
                Variant("gsb_mdpo", "gsb_mdpo"),
                Variant("gaussian_ppo", "gaussian_ppo"),
                _ZOO_COLUMN,
                # The zoo preset spells its geometry as n_steps one-step unrolls; in cpu-gym's 32 envs x 64 steps
                # one unroll is the whole rollout.
                Variant(
                    "sb3_ppo:zoo,cpu-geometry",
                    "ppo",
                    ("--rollout.unrolls-per-iteration", "1"),
                    baseline="sb3_ppo:zoo",
                    preset="zoo",
                ),
            ),
            args=_CPU_GYM_GEOMETRY,
            eval_args=_CPU_GYM_EVAL,
            eval_protocol=_CPU_GYM_PROTOCOL,
            budget_note="1M env steps, as cpu-gym",
            kind="ablation",
        ),
        Suite(
            name="finetune-cpu-gym",
            description="Fine-tuning from demonstrations on two Gymnasium tasks: a flow policy cloned from a "
            "medium Gaussian PPO policy's episodes, then fine-tuned by GSB-MDPO (three lambdas), FPO and DPPO, "
            "against the clone alone, GSB-MDPO from scratch and the demonstrator's recipe rerun, each for the "
            "same fine-tuning budget.",
            tasks=("Hopper-v5", "HalfCheetah-v5"),
            total_steps=_FINETUNE_STEPS,
            seeds=(0, 1, 2),
            preset="gym",
            variants=_finetune_variants(),
            args=_CPU_GYM_GEOMETRY,
            eval_args=_CPU_GYM_EVAL,
            eval_protocol=_CPU_GYM_PROTOCOL,
            budget_note="100k env steps per run after the demonstrations: the demonstrator is cpu-gym's Gaussian "
            "PPO stopped at 200k steps (seed 0), 30 episodes recorded with action noise 0.1, one clone per seed "
            "(5,000 bridge-matching steps); `bc` is that clone scored under the same protocol (its network frozen; its observation normaliser follows the rollouts as in every run, which alone moves it by the path KL shown), "
            "`gsb_mdpo` the fine-tuning at the preset's lambda = 0.08, `gsb_mdpo:scratch` a fresh actor, "
            "`gaussian_ppo:demonstrator-continued` the demonstrator's recipe rerun from scratch for 300k steps (its "
            "200k and the same 100k; not the demonstrator's own run resumed: its seed 0 follows another curve). The "
            "budget table counts the demonstrator's and the demonstrations' env steps",
            pretraining=_FINETUNE_PRETRAINING,
            kind="finetune",
        ),
        Suite(
            name="compute-cpu",
            description="Paper Table 3 layout on HalfCheetah-v5: every method's Table 2 column and geometry "
            "(1024 envs x 24 steps), same env-step budget, one seed, run one after another on this machine.",
            tasks=("HalfCheetah-v5",),
            total_steps=98_304,
            seeds=(0,),
            preset="gym",
            variants=_methods(*PAPER_METHODS),
            eval_args=(
                "--eval.interval-steps",
                "0",
                "--eval.num-evals",
                "1",
                "--eval.final-episodes",
                "2",
                "--eval.episodes",
                "2",
            ),
            eval_protocol="one 2-episode evaluation at the end (kept small: the table measures training cost)",
            budget_note="4 iterations of the paper's geometry; the paper used 5M steps on a GPU",
            kind="compute",
        ),
        Suite(
            name="compute-gpu-playground",
            description="Table 3 layout on a Playground task: every method's Table 1 column and geometry "
            "(2048 envs, 983,040 env steps per iteration), two iterations each, for a GPU machine.",
            tasks=("CartpoleSwingup",),
            total_steps=2 * 983_040,
            seeds=(0,),
            preset="playground",
            variants=_methods(*PAPER_METHODS),
            eval_args=("--eval.num-evals", "1"),
            eval_protocol=PLAYGROUND_PROTOCOL.replace("10 evaluations", "one evaluation at the end"),
            budget_note="two iterations of the paper's geometry; wall-clock includes compilation",
            kind="compute",
        ),
        Suite(
            name="small-envs",
            description="GSB-MDPO's defaults (`--preset cpu`, what `trainers.gsb_mdpo.train(MyEnv)` runs: the paper's "
            "update, but its small geometry and networks, reward normalisation, gradient clip, value-loss weight and "
            "noise hold are not the paper's) on small "
            "envs unlike the one they were first tuned on (InvertedPendulum), next to Stable-Baselines3 PPO with its "
            "own defaults and with rl-baselines3-zoo's settings where the zoo has them without gSDE, and the "
            "do-nothing and random floors.",
            tasks=(
                f"{_SMALL}Reach-v0",
                f"{_SMALL}DoubleIntegrator-v0",
                f"{_SMALL}Puck-v0",
                "Pendulum-v1",
                "MountainCarContinuous-v0",
                "InvertedDoublePendulum-v5",
            ),
            total_steps=100_000,
            task_steps=(
                (f"{_SMALL}Reach-v0", 30_000),
                ("MountainCarContinuous-v0", 50_000),
                ("InvertedDoublePendulum-v5", 200_000),
            ),
            seeds=(0, 1, 2),
            preset="cpu",
            variants=(
                Variant("gsb_mdpo", "gsb_mdpo"),
                Variant("sb3_ppo:defaults", "ppo", preset="sb3"),
                # The zoo's Pendulum and MountainCarContinuous entries train with gSDE, which `trainers.ppo` cannot
                # export as a Gaussian actor: those cells are not run.
                Variant("sb3_ppo:zoo", "ppo", preset="zoo", tasks=("InvertedDoublePendulum-v5",)),
            ),
            eval_args=_SMALL_EVAL,
            eval_protocol=_SMALL_PROTOCOL,
            budget_note="per task, fixed before any default was compared: 30k env steps for Reach, 50k for "
            "MountainCarContinuous, 200k for InvertedDoublePendulum, 100k otherwise (minutes each on a 2-core CPU); "
            "the zoo column only where rl-baselines3-zoo tunes PPO for the task without gSDE",
            floors=True,
        ),
        Suite(
            name="gym-continuous",
            description="GSB-MDPO's defaults (`--preset cpu`) on the Gymnasium continuous tasks a user tries first "
            "(Box2D's LunarLanderContinuous and BipedalWalker, the `box2d` extra; MuJoCo's Reacher and Pusher; "
            "classic control's Pendulum and MountainCarContinuous), next to Stable-Baselines3 PPO with its own "
            "defaults, and the do-nothing and random floors; each column's training time beside its returns.",
            tasks=tuple(task for task, _ in _GYM_CONTINUOUS_STEPS),
            total_steps=1_000_000,
            task_steps=_GYM_CONTINUOUS_STEPS,
            seeds=(0, 1, 2),
            preset="cpu",
            variants=(
                Variant("gsb_mdpo", "gsb_mdpo"),
                # The zoo's settings for these tasks train 16-32 envs or with gSDE, which `trainers.ppo`'s zoo
                # preset (one env, a Gaussian actor) cannot run as published: they set the budgets, not a column.
                Variant("sb3_ppo:defaults", "ppo", preset="sb3"),
            ),
            eval_args=_SMALL_EVAL,
            eval_protocol=_SMALL_PROTOCOL,
            budget_note="per task, fixed before any of its runs: rl-baselines3-zoo's PPO budget where the zoo "
            "tunes PPO for the task without gSDE (1M env steps for LunarLanderContinuous, 5M for BipedalWalker, "
            "1M for Reacher), the zoo's MuJoCo 1M for Pusher (no zoo PPO entry), 1M for Pendulum (ten times the "
            "zoo's gSDE budget, at which SB3's defaults had not started) and small-envs' 50k for "
            "MountainCarContinuous (SB3's defaults reach 93 there); run every column on one machine, one run at a "
            "time, so that the training times compare",
            floors=True,
        ),
        Suite(
            name="compute-gpu",
            description="Paper Table 3 layout on HalfCheetah-v5 with the paper's geometry, for a GPU machine.",
            tasks=("HalfCheetah-v5",),
            total_steps=5_013_504,
            seeds=(0,),
            preset="gym",
            variants=_methods(*PAPER_METHODS),
            eval_protocol=GYM_PROTOCOL,
            budget_note="the paper's 5M env steps",
            kind="compute",
        ),
    )
}


PREREGISTRATION_FILE = Path(__file__).resolve().parents[2] / "hub_cards" / "results" / "preregistration.json"
"""The pre-registered claims (`trainers.benchmark.preregistration`); each one that runs a suite defines it here."""


def confirmatory_suite(registration: dict) -> Suite:
    """The suite of a registered claim's runs: its source suite's preset, geometry, evaluation and budget, on the
    registered tasks only, the treatment everywhere and each task's comparator on that task, at the registered
    (fresh) seeds of each task. Its ledger holds nothing else, so no exploratory run can enter the verdict."""
    source = SUITES[registration["source"]]
    by_task = {e["task"]: e for e in registration["tasks"]}
    comparators: dict[str, list[str]] = {}
    for e in registration["tasks"]:
        comparators.setdefault(e["comparator"], []).append(e["task"])
    treatment = registration["treatment"]
    # Each comparator's page verdict reads the treatment against it (a summary compares a column with its
    # `baseline`); the treatment is compared with nothing.
    variants = [dataclasses.replace(source.variant(treatment), tasks=None, baseline=treatment)]
    variants += [
        dataclasses.replace(source.variant(c), tasks=tuple(t), baseline=treatment)
        for c, t in comparators.items()
    ]
    return dataclasses.replace(
        source,
        name=registration["suite"],
        description=f"Confirmatory runs of the pre-registered claim `{registration['id']}`: "
        f"{registration['claim']} ({source.name}'s settings, fresh seeds).",
        tasks=tuple(by_task),
        seeds=tuple(sorted({s for e in registration["tasks"] for s in e["seeds"]})),
        task_seeds=tuple((t, tuple(e["seeds"])) for t, e in by_task.items()),
        variants=tuple(variants),
        budget_note=f"{source.steps(registration['tasks'][0]['task']):,} env steps, {source.name}'s budget",
        kind="confirmatory",
        floors=False,
    )


def _registered() -> list[dict]:
    if not PREREGISTRATION_FILE.exists():
        return []
    return json.loads(PREREGISTRATION_FILE.read_text())["registrations"]


SUITES.update({r["suite"]: confirmatory_suite(r) for r in _registered() if r.get("suite")})
