"""Typed configuration shared by every trainer: frozen dataclasses parsed by tyro.

Each trainer's `Args` nests these groups and adds its own `algo` group, so the CLI reads
`--rollout.num-envs 2048 --optim.actor-lr 1e-3 --algo.kl-coef 0.8`. The top-level fields (`--env`,
`--seed`, `--total-steps`, `--output-dir`, `--resume`) are the contract other tools rely on. Derived sizes
are properties, and `validate` checks them when the CLI is parsed.
"""

import dataclasses
import importlib
import math
from pathlib import Path
from typing import Annotated, Literal

import tyro

from gsbpolicy import PolicySpec
from gsbpolicy._cli import require_extra
from gsbpolicy._internal import env_kind
from gsbpolicy.hub import check_policy_name


@dataclasses.dataclass(frozen=True)
class RolloutArgs:
    """Rollout and batch geometry (Brax/FPO terms: envs x unroll length x unrolls per iteration)."""

    num_envs: int = 16
    """Parallel environments."""
    unroll_length: int = 32
    """Steps per sequence; GAE runs along it and minibatches are made of whole sequences."""
    unrolls_per_iteration: int = 1
    """Consecutive unrolls collected per iteration (Brax: batch_size * num_minibatches / num_envs)."""
    num_minibatches: int = 4
    """Minibatches per epoch."""
    epochs: int = 4
    """Passes over the iteration's data (Brax: updates per batch)."""
    gamma: float = 0.99
    """Discount factor."""
    gae_lambda: float = 0.95
    """GAE lambda."""
    reward_scaling: float = 1.0
    """Rewards are multiplied by this before GAE."""
    normalize_rewards: bool = False
    """Also divide the rewards the critic and GAE see by the running std of each env's discounted return
    (SB3's VecNormalize `norm_reward`; `trainers._core.return_norm`). Training only: the statistics are
    checkpointed with the run and are no part of the saved policy; logged returns stay in the task's units."""
    noise_hold: int = 1
    """Env steps for which each env's sampling noise is held before a new draw (1: a new draw every step).
    Held noise explores in committed runs of actions, as gSDE's `sde_sample_freq` does, which finds rewards
    that only a sustained push reaches (MountainCar's goal); the policy still acts on every new observation,
    and each action keeps its policy's distribution. Rollouts only: evaluation draws afresh each step."""
    noise_hold_steps: int = 0
    """The env steps, from the start of the run, whose rollouts hold their noise for `noise_hold` steps (0: the
    whole run); after them every step draws afresh, so that later training refines the policy without the hold's
    longer pushes. A count of env steps, not a share of the budget: a run's first steps explore the same way
    whatever its budget, and a short run keeps its hold until it ends."""
    normalize_advantages: bool = True
    """Standardize advantages per minibatch."""
    recompute_gae: bool = False
    """Recompute values and GAE per minibatch with the current critic (Brax/FPO); else once per rollout."""
    episode_length: int = 1000
    """Playground time limit in control steps (Gymnasium envs use their own limits)."""
    action_repeat: int = 1
    """Playground physics steps per action."""
    vectorization: Literal["sync", "async"] = "sync"
    """Gymnasium vector env mode (sync is faster on 2 cores)."""

    def holds_noise(self, env_steps):
        """Whether the rollout that starts after `env_steps` env steps holds its noise (a Python bool for an
        int or a whole-run hold, a traced one for an array)."""
        return self.noise_hold_steps == 0 or env_steps < self.noise_hold_steps

    @property
    def sequences_per_iteration(self) -> int:
        return self.num_envs * self.unrolls_per_iteration

    @property
    def batch_size(self) -> int:
        """Sequences per minibatch."""
        return self.sequences_per_iteration // self.num_minibatches

    @property
    def steps_per_iteration(self) -> int:
        """Env steps (transitions) collected per iteration."""
        return self.sequences_per_iteration * self.unroll_length

    def validate(self) -> None:
        positive = (
            "num_envs",
            "unroll_length",
            "unrolls_per_iteration",
            "num_minibatches",
            "epochs",
            "episode_length",
            "action_repeat",
            "noise_hold",
        )
        for name in positive:
            require(getattr(self, name) >= 1, f"rollout.{name}", ">= 1", getattr(self, name))
        if self.sequences_per_iteration % self.num_minibatches:
            raise ValueError(
                f"num_envs * unrolls_per_iteration = {self.sequences_per_iteration} sequences is not "
                f"divisible by num_minibatches = {self.num_minibatches}"
            )
        require(0 < self.gamma <= 1, "rollout.gamma", "in (0, 1]", self.gamma)
        require(0 <= self.gae_lambda <= 1, "rollout.gae_lambda", "in [0, 1]", self.gae_lambda)
        require(self.reward_scaling > 0, "rollout.reward_scaling", "> 0", self.reward_scaling)
        require(self.noise_hold_steps >= 0, "rollout.noise_hold_steps", ">= 0", self.noise_hold_steps)


@dataclasses.dataclass(frozen=True)
class OptimArgs:
    """Adam optimizers for actor and critic (separate, so each has its own learning rate and clipping)."""

    actor_lr: float = 3e-4
    """Actor learning rate."""
    critic_lr: float = 3e-4
    """Critic learning rate."""
    actor_cosine_decay: bool = False
    """Decay the actor learning rate to 0 with a cosine over training."""
    critic_cosine_decay: bool = False
    """Decay the critic learning rate to 0 with a cosine over training."""
    cosine_decay_steps: int | None = None
    """Env steps the cosine decays span (rounded up to whole iterations); None: the run's total_steps. Longer
    than the run: the run stops part way through a longer schedule (a run read at a budget smaller than the
    one its schedule is laid out for)."""
    max_grad_norm: float | None = None
    """Clip each network's gradient to this global norm (None: no clipping)."""
    value_coef: float = 0.5
    """Weight of the critic loss mean((V - V_target)^2)."""

    def validate(self) -> None:
        require(self.actor_lr > 0, "optim.actor_lr", "> 0", self.actor_lr)
        require(self.critic_lr > 0, "optim.critic_lr", "> 0", self.critic_lr)
        norm = self.max_grad_norm
        require(norm is None or norm > 0, "optim.max_grad_norm", "> 0 (or None: no clipping)", norm)
        require(self.value_coef >= 0, "optim.value_coef", ">= 0", self.value_coef)
        steps = self.cosine_decay_steps
        require(steps is None or steps >= 1, "optim.cosine_decay_steps", ">= 1 (or None: the run)", steps)


@dataclasses.dataclass(frozen=True)
class PolicyArgs:
    """Flow-policy architecture and sampler (see `gsbpolicy.PolicySpec`)."""

    num_steps: int = 8
    """Generation steps N."""
    width: int = 64
    """Drift MLP width."""
    depth: int = 2
    """Drift MLP hidden layers."""
    activation: Literal["silu", "elu", "relu", "tanh", "gelu", "mish"] = "silu"
    """Drift MLP activation."""
    time_embedding: Literal["sinusoidal", "fourier"] = "sinusoidal"
    """Time embedding kind."""
    time_embed_dim: int = 8
    """Time embedding size."""
    output_scale: float = 0.25
    """Drift output scale."""
    sigma_schedule: Literal["constant", "linear", "exponential"] = "exponential"
    """Diffusion schedule from sigma_max (t = 0) to sigma_min (t = 1)."""
    sigma_max: float = 1.0
    """Diffusion coefficient at the noise end."""
    sigma_min: float = 0.5
    """Diffusion coefficient at the action end."""
    squash: Literal["tanh", "clip", "none"] = "tanh"
    """Map from a^(N) into the action bounds."""

    def validate(self) -> None:
        for name in ("num_steps", "width", "time_embed_dim"):
            require(getattr(self, name) >= 1, f"policy.{name}", ">= 1", getattr(self, name))
        require(self.depth >= 0, "policy.depth", ">= 0", self.depth)
        for name in ("sigma_max", "sigma_min"):  # which may be 0 depends on the schedule: PolicySpec checks
            require(getattr(self, name) >= 0, f"policy.{name}", ">= 0", getattr(self, name))

    def spec(self, obs_dim: int, act_dim: int, low, high, env_id: str) -> PolicySpec:
        """The `PolicySpec` for an env with these dimensions and bounds."""
        fields = dataclasses.asdict(self)
        return PolicySpec(
            obs_dim=obs_dim,
            act_dim=act_dim,
            action_low=tuple(float(x) for x in low),
            action_high=tuple(float(x) for x in high),
            env_id=env_id,
            **fields,
        )


@dataclasses.dataclass(frozen=True)
class CriticArgs:
    """Value network V(s) = MLP(normalize(s)) (it shares the policy's observation normalizer)."""

    width: int = 64
    """Hidden width."""
    depth: int = 2
    """Hidden layers."""
    activation: Literal["silu", "elu", "relu", "tanh", "gelu", "mish"] = "elu"
    """Hidden activation."""

    def validate(self) -> None:
        require(self.width >= 1, "critic.width", ">= 1", self.width)
        require(self.depth >= 0, "critic.depth", ">= 0", self.depth)


@dataclasses.dataclass(frozen=True)
class EvalArgs:
    """Evaluation during training; every point logs deterministic-ODE and stochastic returns."""

    num_evals: int = 10
    """Evaluation points spread evenly over training, the last at the end; used when `interval_steps`
    is 0 (the Playground protocol)."""
    interval_steps: int = 0
    """Evaluate every this many env steps instead (the Gym protocol: 1M); 0 uses `num_evals`."""
    episodes: int = 10
    """Gymnasium: episodes per evaluation (run in parallel in a vector env)."""
    num_envs: int = 128
    """Playground: fresh envs per evaluation, each run for one episode of `rollout.episode_length` steps."""
    final_episodes: int = 10
    """Episodes of the final deterministic evaluation written to results.json."""

    def validate(self) -> None:
        for name, most in EVAL_LIMITS.items():
            value = getattr(self, name)
            require(1 <= value <= most, f"eval.{name}", f"between 1 and {most:,}", value)
        require(
            self.interval_steps >= 0, "eval.interval_steps", ">= 0 (0: use num_evals)", self.interval_steps
        )


EVAL_LIMITS = {"num_evals": 10_000, "episodes": 10_000, "num_envs": 65_536, "final_episodes": 10_000}
"""The most an evaluation count may be: far above any protocol (the paper evaluates 10 times, 10 or 128 episodes
each), and low enough that a mistyped count (an extra digit or three) is refused instead of simulating for days
(each episode is up to 1,000 env steps)."""


@dataclasses.dataclass(frozen=True)
class LogArgs:
    """Logging, checkpoints and export."""

    checkpoint_every: int = 10
    """Write an atomic checkpoint every this many iterations (and at the end)."""
    tensorboard: bool = False
    """Also write TensorBoard scalars (needs the `tensorboard` package)."""
    progress: bool = True
    """Show a console progress bar."""
    export_onnx: bool = False
    """Also write policy.onnx into the policy folder (needs the `onnx` extra)."""
    keep_best: bool = False
    """Also keep the policy of the best deterministic evaluation during training in `best_policy/` beside
    `policy/` (as SB3's EvalCallback keeps best_model), its `best.json` saying which evaluation it was; `policy/`
    and results.json stay the last iteration's. A best is kept once a checkpoint covers it (a resume discards the
    evaluations after the checkpoint, and a best among them with them); turned on at a resume, it compares the
    evaluations from there on."""
    wandb: bool = False
    """Also log every metrics.jsonl record to Weights & Biases, at step env_steps (needs the `track`
    extra; `WANDB_MODE=offline` keeps it on disk). A --resume continues the same wandb run."""
    wandb_project: str = "gsbpolicy"
    """The wandb project of --log.wandb."""
    wandb_entity: str | None = None
    """The wandb entity (user or team) of --log.wandb; None is your default entity."""

    def validate(self) -> None:
        require(self.checkpoint_every >= 1, "log.checkpoint_every", ">= 1", self.checkpoint_every)
        if self.tensorboard:
            require_extra("train", ["tensorboard"], "--log.tensorboard")
        if self.export_onnx:
            require_extra("onnx", ["jax2onnx", "onnx"], "--log.export-onnx")
        if self.wandb:
            require_extra("track", ["wandb"], "--log.wandb")


@dataclasses.dataclass(frozen=True)
class InitArgs:
    """Fine-tuning: start the actor from a pretrained flow policy (gsb_mdpo, fpo and dppo; see
    `trainers._core.init_from`)."""

    source: Annotated[str | None, tyro.conf.arg(aliases=("--init-from",))] = None
    """A policy folder or Hub repo id whose actor and observation normaliser the run starts from (its spec
    must be this run's: the same --policy.* values, algorithm sampler options and env); None: a fresh actor."""
    critic_warmup_steps: int = 0
    """Env steps at the start during which only the critic learns (the actor's learning rate is 0), so that
    the first actor updates see a critic fitted to the pretrained policy. Rounded up to whole iterations."""

    def validate(self) -> None:
        require(
            self.source is None or self.source.strip() != "",
            "init.source",
            "a policy folder or Hub id",
            self.source,
        )
        if self.source is not None:
            try:
                check_policy_name(self.source)
            except ValueError as err:
                raise ValueError(f"--init-from: {err}") from None
        require(self.critic_warmup_steps >= 0, "init.critic_warmup_steps", ">= 0", self.critic_warmup_steps)
        require(
            self.source is not None or self.critic_warmup_steps == 0,
            "init.critic_warmup_steps",
            "0 without --init-from (a fresh actor has no behaviour to keep)",
            self.critic_warmup_steps,
        )


@dataclasses.dataclass(frozen=True)
class TrainArgs:
    """Everything an on-policy trainer needs except its algorithm group (which subclasses add as `algo`)."""

    env: str = "InvertedPendulum-v5"
    """Environment: a Gymnasium id ("Hopper-v5") or a MuJoCo Playground dm_control_suite name
    ("CartpoleSwingup")."""
    seed: int = 0
    """Random seed (network init, sampling noise, env resets)."""
    seeds: tuple[int, ...] = ()
    """Train these seeds side by side in one process instead of `--seed` (Playground envs, one device): the
    whole iteration is vmapped over seeds, compiled once, and each seed gets the ordinary run folder of a
    single-seed run (runs/<env>/<algo>/seed_<s>, or <output-dir>/seed_<s>)."""
    seed_batching: Literal["auto", "vmap", "map"] = "auto"
    """How `--seeds` share the program: "vmap" batches them (what fills a GPU), "map" runs them one after
    another inside it (`lax.map`; a grouped seed is then bit-identical to the seed run alone); "auto" is vmap
    on accelerators and map on CPUs, where batching gains nothing."""
    total_steps: int = 200_000
    """Env steps to train for (rounded up to whole iterations)."""
    output_dir: Path | None = None
    """Run folder; default runs/<env>/<algo>/seed_<seed>."""
    resume: bool = False
    """Continue from the run folder's checkpoint (the run then matches an uninterrupted one)."""
    preset: str = "cpu"
    """Name of the preset these values started from (set by --preset; recorded in run.json)."""
    distributed: bool = False
    """Join a multi-process run with `jax.distributed.initialize()` (coordinator, process count and id come
    from Slurm, Open MPI or JAX_COORDINATOR_ADDRESS / JAX_NUM_PROCESSES / JAX_PROCESS_ID). Launches by
    `srun`/`mpirun` with several tasks, or with JAX_COORDINATOR_ADDRESS set, are detected without it.
    Playground envs only; the batch is split over all devices of all processes, process 0 writes the files."""
    compile_cache: str = "auto"
    """JAX's persistent compilation cache: "auto" ($GSBPOLICY_COMPILE_CACHE, else $JAX_COMPILATION_CACHE_DIR,
    else ~/.cache/gsbpolicy/jax), "off", or a folder. A restart, the next seed or the next run of the same
    configuration then loads its compiled functions instead of compiling them again."""
    matmul_precision: Literal["default", "high", "highest"] = "highest"
    """`jax_default_matmul_precision` for the whole run. "highest" is full float32: "default" lets GPUs use
    TF32/bf16 passes, which is known to change MJX physics and Playground results (mujoco_playground
    issues #86, #112); it changes nothing on CPU. Recorded in run.json."""
    rollout: RolloutArgs = RolloutArgs()
    optim: OptimArgs = OptimArgs()
    policy: PolicyArgs = PolicyArgs()
    critic: CriticArgs = CriticArgs()
    eval: EvalArgs = EvalArgs()
    log: LogArgs = LogArgs()
    init: InitArgs = InitArgs()

    @property
    def num_iterations(self) -> int:
        return -(-self.total_steps // self.rollout.steps_per_iteration)

    def validate(self) -> None:
        """Raise ValueError naming the first bad field (as its CLI flag), before any work starts."""
        check_finite(self)
        require(
            bool(self.env.strip()), "env", "an env id (a Gymnasium id or a Playground task name)", self.env
        )
        require(
            self.output_dir is None or str(self.output_dir).strip() not in ("", "."),
            "output_dir",
            "a folder for the run (not empty: that would write the run into the current folder)",
            None if self.output_dir is None else str(self.output_dir),
        )
        require(0 <= self.seed < 2**32, "seed", "in [0, 2**32)", self.seed)
        self._validate_seed_group()
        for group in (self.rollout, self.optim, self.policy, self.critic, self.eval, self.log, self.init):
            group.validate()
        algo = getattr(self, "algo", None)  # each trainer's Args adds its algorithm's group
        if hasattr(algo, "validate"):
            algo.validate()
        self._validate_budget()
        for name, value in widths(self):
            require(value >= 1, name, ">= 1", value)
        check_env_id(self.env)

    def _validate_seed_group(self) -> None:
        if not self.seeds:
            return
        for seed in self.seeds:
            require(0 <= seed < 2**32, "seeds", "in [0, 2**32)", seed)
        require(len(set(self.seeds)) == len(self.seeds), "seeds", "distinct", self.seeds)
        require(
            env_kind(self.env) == "playground",
            "seeds",
            "used with a Playground env (a Gymnasium env steps on the host one seed after another, so "
            "grouping would save only the compile: run the seeds as separate processes)",
            self.seeds,
        )
        require(
            not self.distributed,
            "seeds",
            "used without --distributed (a seed group runs on one device)",
            self.seeds,
        )

    def _validate_budget(self) -> None:
        """At least one iteration, within the 32-bit step counters, and no longer a critic warm-up than it."""
        require(self.total_steps >= 1, "total_steps", ">= 1", self.total_steps)
        per = self.rollout.steps_per_iteration
        require(
            self.total_steps >= per,
            "total_steps",
            f"at least one iteration ({per:,} env steps: --rollout.num-envs x --rollout.unroll-length x "
            "--rollout.unrolls-per-iteration)",
            self.total_steps,
        )
        require(
            self.num_iterations * per < 2**31,
            "total_steps",
            f"below 2**31 = {2**31:,} env steps once rounded up to whole iterations (the step counters are "
            "32-bit)",
            self.total_steps,
        )
        warmup = self.init.critic_warmup_steps
        # Equal to the budget is allowed: the pretrained policy scored under this run's own protocol (the
        # fine-tuning suites' "pretrained only" column); beyond it is a mistake.
        require(
            warmup <= self.total_steps,
            "init.critic_warmup_steps",
            f"<= --total-steps ({self.total_steps}; equal: the actor's network never trains)",
            warmup,
        )


def flag(name: str) -> str:
    """The CLI flag of a dotted field name: "optim.actor_lr" -> "--optim.actor-lr"."""
    return "--" + name.replace("_", "-")


def require(ok: bool, name: str, rule: str, value) -> None:
    """Raise ValueError "--name must be RULE, got VALUE" unless `ok`."""
    if not ok:
        raise ValueError(f"{flag(name)} must be {rule}, got {value!r}")


def _fields(group, prefix: str = ""):
    """(dotted name, value) of every leaf field of a config, nested groups (the `algo` one too) included."""
    for field in dataclasses.fields(group):
        value, name = getattr(group, field.name), prefix + field.name
        if dataclasses.is_dataclass(value):
            yield from _fields(value, name + ".")
        else:
            yield name, value


def check_finite(args) -> None:
    """Every float field, in every group: NaN or inf would train, save and publish a broken policy."""
    for name, value in _fields(args):
        for number in value if isinstance(value, tuple) else (value,):
            if isinstance(number, float):
                require(math.isfinite(number), name, "finite", value)


def widths(args):
    """Every `width` field (the flow policy's, the critic's and any in an algorithm's own actor group)."""
    return [(name, value) for name, value in _fields(args) if name.rpartition(".")[2] == "width"]


def check_env_id(env: str) -> None:
    """Fail at parse time on an unknown env id, listing what is valid."""
    if env_kind(env) == "gymnasium":
        import gymnasium

        module, _, env_id = env.rpartition(":")
        if module:  # "module:Env-v0": importing the module registers its envs (as gymnasium.make does)
            try:
                importlib.import_module(module)
            except ImportError as err:
                raise ValueError(f"env {env!r}: cannot import {module!r} ({err})") from None
        if env_id not in gymnasium.registry:
            raise ValueError(f"unknown Gymnasium env id {env_id!r}")
        return
    from .envs.playground_env import resolve_playground_env

    resolve_playground_env(env)


def for_seed(args: TrainArgs, seed: int) -> TrainArgs:
    """The config of one seed of a `--seeds` group: that of the single-seed run it stands for, in
    <output-dir>/seed_<s> when an output folder is given."""
    output_dir = None if args.output_dir is None else args.output_dir / f"seed_{seed}"
    return dataclasses.replace(args, seed=seed, seeds=(), output_dir=output_dir)


def output_path(output_dir: Path | None, env: str, algo: str, seed: int) -> Path:
    """The run folder: `output_dir` if given, else runs/<env>/<algo>/seed_<seed>."""
    return output_dir if output_dir is not None else Path("runs") / env / algo / f"seed_{seed}"
