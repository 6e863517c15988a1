"""Stable-Baselines3 PPO, the Gaussian baseline users know, with the shared run folder and evaluation.

Same CLI contract and run folder (run.json, metrics.jsonl, policy/results.json) as the other trainers: the run is
the shared loop (`trainers._core.lifecycle.run_training`), each of its iterations one turn of SB3's `learn()`
loop (collect a rollout, update). The SB3 policy and VecNormalize's statistics are
converted into a `gsbpolicy.GaussianActor`, evaluated by the shared code and saved as the deployable folder
(config.json + model.safetensors; `GSBPolicy.from_pretrained`).
Checkpoints are safetensors + JSON (weights, Adam state, observation statistics); resuming is not bit-exact.

SB3 cannot express (the presets say where it matters): a state-dependent std or tanh squashing (actions are
clipped), GAE recomputed per minibatch, minibatches of whole sequences (SB3 shuffles transitions), per-network
gradient clipping (SB3 clips the joint norm), different actor and critic activations; VecNormalize updates the
observation statistics every step. Actor and critic learning rates are two Adam parameter groups (trainers.sb3.model).
"""

import dataclasses
import math
from typing import Literal

from gsbpolicy._cli import require_extra

# Before the imports that need the extra: `python -m trainers.ppo` without it ends with one line, no traceback.
require_extra("sb3", ["stable_baselines3", "torch"], "trainers.ppo", exit_now=__name__ == "__main__")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from gsbpolicy import GaussianActor, save_policy  # noqa: E402

from ._core import api, compile_cache  # noqa: E402
from ._core.config import CriticArgs, OptimArgs, TrainArgs, require  # noqa: E402
from ._core.envs import make_evaluator  # noqa: E402
from ._core.init_from import refuse as refuse_init  # noqa: E402
from ._core.lifecycle import Diverged, Learner, Run, run_training  # noqa: E402
from ._core.runfolder import RunFolder  # noqa: E402
from .gaussian_ppo import GaussianPpo, GaussianPpoArgs  # noqa: E402
from .gaussian_ppo import cpu_preset as gaussian_cpu  # noqa: E402
from .presets import gym, playground, specialise, with_fields  # noqa: E402
from .sb3.model import load_training_state, make_ppo, to_gaussian_actor, training_state  # noqa: E402
from .sb3.vecenv import EpisodeCollector, make_sb3_env  # noqa: E402

EVALUATOR = GaussianPpo(GaussianPpoArgs())  # exported SB3 policies are evaluated as Gaussian PPO actors
RENAMED = {"policy_gradient_loss": "actor_loss", "clip_fraction": "clip_frac", "std": "std_mean"}
"""SB3 logger names -> the shared loop's metric names where they mean the same."""


@dataclasses.dataclass(frozen=True)
class Sb3PpoArgs:
    """SB3 PPO coefficients and actor architecture (the critic is `--critic.*`, with the same activation)."""

    clip: float = 0.2
    """PPO clip epsilon (clip_range)."""
    entropy_coef: float = 0.0
    """Entropy bonus weight (ent_coef)."""
    width: int = 64
    """Actor MLP width."""
    depth: int = 2
    """Actor MLP hidden layers."""
    activation: Literal["tanh", "elu", "silu", "relu"] = "tanh"
    """Activation of actor and critic (SB3 has one activation_fn); must equal --critic.activation."""
    init_log_std: float = 0.0
    """Initial state-independent log std."""
    ortho_init: bool = True
    """SB3's orthogonal initialisation; False keeps torch's default U(+-1/sqrt(fan_in)), which equals Equinox's."""
    normalize_reward: bool = False
    """Normalise rewards by the running std of the discounted return (VecNormalize's `norm_reward`, part of
    rl-baselines3-zoo's `normalize: true`); the reported returns stay in the task's units."""
    torch_threads: int = 1
    """torch intra-op threads. 1 suits these small MLPs: more threads mostly add synchronisation and contend with env stepping."""

    def validate(self) -> None:
        require(self.clip > 0, "algo.clip", "> 0 (the half-width of PPO's ratio interval)", self.clip)
        require(self.entropy_coef >= 0, "algo.entropy_coef", ">= 0 (a bonus)", self.entropy_coef)
        require(self.depth >= 0, "algo.depth", ">= 0", self.depth)
        require(self.torch_threads >= 1, "algo.torch_threads", ">= 1", self.torch_threads)


@dataclasses.dataclass(frozen=True)
class Args(TrainArgs):
    algo: Sb3PpoArgs = Sb3PpoArgs()

    def validate(self) -> None:
        super().validate()
        problems = {
            "SB3 uses one activation for actor and critic: set --critic.activation to --algo.activation": self.critic.activation
            != self.algo.activation,
            "SB3 PPO computes GAE once per rollout: --rollout.recompute-gae is not supported": self.rollout.recompute_gae,
            "cosine learning-rate decay is not supported by this trainer": self.optim.actor_cosine_decay
            or self.optim.critic_cosine_decay,
            "SB3 PPO trains one seed per process: --seeds is not supported (run the seeds as separate processes)": bool(
                self.seeds
            ),
        }
        for message, failed in problems.items():
            if failed:
                raise ValueError(message)


class Sb3Trainer(Run, Learner):
    """One SB3 PPO run driven by the shared loop: `collect_and_update` is one turn of SB3's `learn()` loop (a
    rollout, then `train()`), so the loop writes the train record, the due evaluations and checkpoints exactly
    when it does for the other trainers."""

    def __init__(self, args: Args):
        args.validate()
        compile_cache.enable(args.compile_cache)  # the Playground envs' jitted steps
        self.args = args
        refuse_init(args.init, "ppo")  # SB3 builds its own Gaussian actor
        self.folder = RunFolder("ppo", args)
        self.run_dir, self.folders, self.runs = self.folder.run_dir, [self.folder], [self]
        with self.folder.released_on_error():
            self._build()

    def _build(self) -> None:
        args = self.args
        torch.set_num_threads(args.algo.torch_threads)
        env, self.normalizer = make_sb3_env(args, args.algo.normalize_reward)
        self._evaluate = make_evaluator(EVALUATOR, args)
        self.model = make_ppo(args, env)
        self.collector = EpisodeCollector()
        self._iteration = 0
        self._total = None  # SB3's total_timesteps, once learning has started (`_start_learning`)

    def _ret_rms(self):
        """VecNormalize's return statistics when rewards are normalised (checkpointed with the run)."""
        return self.normalizer.ret_rms if self.normalizer.norm_reward else None

    def actor(self) -> GaussianActor:
        """The current SB3 policy with its observation statistics, as the deployable `GaussianActor`."""
        a = self.args.algo
        obs_rms = self.normalizer.obs_rms
        return to_gaussian_actor(self.model, obs_rms, a.width, a.depth, a.activation, self.args.env)

    # ------------------------------------------------------------------ what the loop asks for
    @property
    def iteration(self) -> int:
        return self._iteration

    @property
    def env_steps(self) -> int:
        return self.model.num_timesteps

    def state_trees(self) -> dict:
        return training_state(self.model, self.normalizer.obs_rms, self._ret_rms())

    # SB3 has no public accessor for its update counter (it logs it as train/n_updates): a resumed run must
    # continue it, so the checkpoint record carries it.
    def checkpoint_fields(self) -> dict:
        return {"n_updates": self.model._n_updates}

    def load_state(self, trees: dict, meta: dict) -> None:
        load_training_state(self.model, self.normalizer.obs_rms, trees, self._ret_rms())
        self._iteration, self.model.num_timesteps = meta["iteration"], meta["env_steps"]
        self.model._n_updates = meta["n_updates"]

    def evaluate(self, deterministic: bool, seed: int, episodes: int | None = None):
        """Per-episode returns and lengths by the shared evaluation code."""
        return self._evaluate(self.actor(), seed, deterministic, episodes)

    def save_actor(self, policy_dir) -> None:
        save_policy(self.actor(), policy_dir)

    def close(self) -> None:
        self.model.env.close()

    # ------------------------------------------------------------------ training
    def run(self):
        """Train to the end and write the policy folder; the run folder's lock is released however it ends."""
        return run_training(self, self.folders)[0]

    def _start_learning(self) -> None:
        """What `learn()` does before its loop. SB3 counts `total_timesteps` from num_timesteps when not
        resetting it: a restored checkpoint (always after an iteration, so num_timesteps > 0) continues, a
        fresh run starts at 0."""
        model, resumed = self.model, self.model.num_timesteps > 0
        total = self.args.num_iterations * self.args.rollout.steps_per_iteration
        self._total, self._callback = model._setup_learn(
            total - model.num_timesteps, self.collector, reset_num_timesteps=not resumed, tb_log_name="PPO"
        )
        self._callback.on_training_start(locals(), globals())

    def collect_and_update(self) -> list[tuple[dict, dict]]:
        """One turn of `learn()`'s loop: a rollout of n_steps per env, then SB3's update."""
        if self._total is None:
            self._start_learning()
        model = self.model
        model.collect_rollouts(model.env, self._callback, model.rollout_buffer, n_rollout_steps=model.n_steps)
        model._update_current_progress_remaining(model.num_timesteps, self._total)
        model.train()
        self._iteration += 1
        logged = model.logger.name_to_value
        metrics = {RENAMED.get(k[6:], k[6:]): float(v) for k, v in logged.items() if k.startswith("train/")}
        metrics["entropy"] = -metrics.pop("entropy_loss")
        if (bad := self._non_finite(metrics)) is not None:
            raise Diverged(bad)
        return [(metrics, self.collector.pop())]

    def _non_finite(self, metrics: dict) -> str | None:
        """What the update made non-finite, if anything (the run stops before any of it is logged or saved)."""
        params = list(self.model.policy.parameters())
        obs_rms = self.normalizer.obs_rms
        return (
            next((name for name, value in metrics.items() if not math.isfinite(value)), None)
            or (
                "gradient"
                if any(p.grad is not None and not torch.isfinite(p.grad).all() for p in params)
                else None
            )
            or ("parameters" if not all(torch.isfinite(p).all() for p in params) else None)
            or ("observation statistics" if not np.isfinite([obs_rms.mean, obs_rms.var]).all() else None)
        )


def playground_preset(env: str | None) -> Args:
    """Table 1, PPO column, as far as SB3 goes: 4x32 actor and 5x256 critic, SiLU, lr 3e-4 / 3e-4, clip 0.1,
    value coef 0.25, entropy 0, no gradient clipping, reward scaling 10. Deviations (SB3 cannot express them):
    state-independent std and clipping instead of the reference's softplus std and tanh; GAE once per rollout
    instead of per minibatch; minibatches of transitions."""
    base = playground(env or "CartpoleSwingup")
    return specialise(
        Args,
        with_fields(base, rollout={"recompute_gae": False}),
        critic=CriticArgs(width=256, depth=5, activation="silu"),
        optim=OptimArgs(actor_lr=3e-4, critic_lr=3e-4, value_coef=0.25, max_grad_norm=None),
        algo=Sb3PpoArgs(clip=0.1, entropy_coef=0.0, width=32, depth=4, activation="silu"),
    )


def gym_preset(env: str | None) -> Args:
    """Table 2, PPO column: ELU 3x256 actor and critic, state-independent log std, clip 0.2, actor lr 1e-4,
    critic lr 1e-3 (two Adam parameter groups), gradient clip 1.0 (of the joint norm), entropy 0."""
    return specialise(
        Args,
        gym(env or "HalfCheetah-v5"),
        critic=CriticArgs(width=256, depth=3, activation="elu"),
        optim=OptimArgs(actor_lr=1e-4, critic_lr=1e-3, max_grad_norm=1.0, value_coef=1.0),
        algo=Sb3PpoArgs(clip=0.2, entropy_coef=0.0, width=256, depth=3, activation="elu"),
    )


def cpu_preset(env: str | None) -> Args:
    """`trainers.gaussian_ppo`'s cpu preset, as like-for-like as SB3 allows: 2x64 tanh networks initialised
    as Equinox does (no orthogonal init), 32 envs x 32 steps, 4 minibatches of 256 transitions, 10 epochs,
    lr 3e-4, no gradient clipping (SB3 would clip the joint actor + critic norm)."""
    return specialise(Args, gaussian_cpu(env), algo=Sb3PpoArgs(ortho_init=False))


ZOO_TUNED = {
    # task: (n_steps, batch_size, n_epochs, gamma, gae_lambda, learning_rate, ent_coef, clip_range,
    #        max_grad_norm, vf_coef, (width, depth, activation, log_std_init, ortho_init))
    "HalfCheetah": (512, 64, 20, 0.98, 0.92, 2.0633e-05, 0.000401762, 0.1, 0.8, 0.58096, (256, 2, "relu", -2.0, False)),
    "Hopper": (512, 32, 5, 0.999, 0.99, 9.80828e-05, 0.00229519, 0.2, 0.7, 0.835671, (256, 2, "relu", -2.0, False)),
    "Walker2d": (512, 32, 20, 0.99, 0.95, 5.05041e-05, 0.000585045, 0.1, 1.0, 0.871923, (64, 2, "tanh", 0.0, True)),
    # Swimmer: the zoo's MuJoCo defaults (SB3's PPO defaults) with gamma 0.9999.
    "Swimmer": (2048, 64, 10, 0.9999, 0.95, 3e-4, 0.0, 0.2, 0.5, 0.5, (64, 2, "tanh", 0.0, True)),
    # The small-envs suite's zoo entries (SB3's default network). A batch larger than the rollout is one minibatch.
    "InvertedDoublePendulum": (128, 512, 10, 0.98, 0.8, 1.55454e-4, 1.05057e-06, 0.4, 0.5, 0.695929, (64, 2, "tanh", 0.0, True)),
    "InvertedPendulum": (32, 64, 5, 0.999, 0.9, 2.22425e-4, 1.37976e-07, 0.4, 0.3, 0.19816, (64, 2, "tanh", 0.0, True)),
}  # fmt: skip
SB3_DEFAULTS = (2048, 64, 10, 0.99, 0.95, 3e-4, 0.0, 0.2, 0.5, 0.5, (64, 2, "tanh", 0.0, True))
"""`stable_baselines3.PPO`'s constructor defaults, in `ZOO_TUNED`'s order."""
"""rl-baselines3-zoo's tuned PPO hyperparameters (`hyperparams/ppo.yml`, MuJoCo v3 entries; one env,
`normalize: true`, 1M steps). Networks without an entry there are SB3's defaults (2x64 tanh, orthogonal
init, log std 0)."""


def zoo_preset(env: str | None) -> Args:
    """What an SB3 user would run: rl-baselines3-zoo's tuned PPO for this Gymnasium MuJoCo task (`ZOO_TUNED`),
    its geometry (one env, n_steps per rollout, minibatches of batch_size transitions), one learning rate for
    actor and critic, observation and reward normalisation. A reference column, not one of the paper's."""
    env = env or "HalfCheetah-v5"
    task = env.split("-v")[0]
    if task not in ZOO_TUNED:
        raise ValueError(
            f"rl-baselines3-zoo has no tuned PPO for {env}; the zoo preset covers {sorted(ZOO_TUNED)}"
        )
    return _sb3_preset(env, ZOO_TUNED[task], "zoo", normalize_reward=True)


def sb3_preset(env: str | None) -> Args:
    """What `PPO("MlpPolicy", env)` trains: SB3's defaults (`SB3_DEFAULTS`: one env, 2048-step rollouts, 10
    epochs of minibatches of 64, lr 3e-4, 2x64 tanh with orthogonal init), rewards as they come. One departure:
    observations are normalised as in every run here (the normaliser is part of the saved policy)."""
    return _sb3_preset(env or "HalfCheetah-v5", SB3_DEFAULTS, "sb3", normalize_reward=False)


def _sb3_preset(env: str, settings: tuple, name: str, normalize_reward: bool) -> Args:
    n_steps, batch, epochs, gamma, lam, lr, ent, clip, max_norm, vf, net = settings
    width, depth, activation, log_std, ortho = net
    base = gym(env)
    # SB3 shuffles single transitions, so in the shared geometry a "sequence" is one step: n_steps unrolls of
    # length 1 per iteration, n_steps / batch_size minibatches (make_ppo turns these back into SB3's terms).
    rollout = dataclasses.replace(
        base.rollout,
        num_envs=1,
        unroll_length=1,
        unrolls_per_iteration=n_steps,
        num_minibatches=max(1, n_steps // batch),
        epochs=epochs,
        gamma=gamma,
        gae_lambda=lam,
    )
    return specialise(
        Args,
        dataclasses.replace(base, rollout=rollout, preset=name),
        critic=CriticArgs(width=width, depth=depth, activation=activation),
        optim=OptimArgs(actor_lr=lr, critic_lr=lr, max_grad_norm=max_norm, value_coef=vf),
        algo=Sb3PpoArgs(
            clip=clip,
            entropy_coef=ent,
            width=width,
            depth=depth,
            activation=activation,
            init_log_std=log_std,
            ortho_init=ortho,
            normalize_reward=normalize_reward,
        ),
    )


PRESETS = {
    "cpu": cpu_preset,
    "playground": playground_preset,
    "gym": gym_preset,
    "zoo": zoo_preset,
    "sb3": sb3_preset,
}


train, main = api.entry_points("ppo", Args, PRESETS, __doc__, Sb3Trainer)

if __name__ == "__main__":
    main()
