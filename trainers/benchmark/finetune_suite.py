"""The fine-tuning suite: a flow policy cloned from a Gaussian PPO demonstrator's episodes, then fine-tuned by
each method, against the clone alone, a fresh actor and the demonstrator's recipe rerun."""

from .pretraining import PRETRAINED, Pretraining
from .suite_types import Suite, Variant
from .table_suites import CPU_GYM_EVAL, CPU_GYM_GEOMETRY, CPU_GYM_PROTOCOL

# The fine-tuning suite's policy: GSB-MDPO's Table 2 column (`trainers.gsb_mdpo.gym_preset`; a test checks
# these flags against it), which behaviour cloning fits and every fine-tuning column then trains.
_GSB_GYM_POLICY = (
    "--policy.num-steps",
    "16",
    "--policy.width",
    "256",
    "--policy.depth",
    "3",
    "--policy.activation",
    "silu",
    "--policy.time-embedding",
    "fourier",
    "--policy.time-embed-dim",
    "16",
    "--policy.output-scale",
    "0.25",
    "--policy.sigma-schedule",
    "linear",
    "--policy.sigma-max",
    "3.0",
    "--policy.sigma-min",
    "0.3",
    "--policy.squash",
    "clip",
)
_FINETUNE_STEPS = 100_000
_FINETUNE = ("--init-from", PRETRAINED, "--init.critic-warmup-steps", "8192")
"""Fine-tuning: start from the seed's cloned policy; 4 iterations of critic warm-up before the actor moves."""
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


FINETUNE_SUITE = Suite(
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
    args=CPU_GYM_GEOMETRY,
    eval_args=CPU_GYM_EVAL,
    eval_protocol=CPU_GYM_PROTOCOL,
    budget_note="100k env steps per run after the demonstrations: the demonstrator is cpu-gym's Gaussian "
    "PPO stopped at 200k steps (seed 0), 30 episodes recorded with action noise 0.1, one clone per seed "
    "(5,000 bridge-matching steps); `bc` is that clone scored under the same protocol (its network frozen; its observation normaliser follows the rollouts as in every run, which alone moves it by the path KL shown), "
    "`gsb_mdpo` the fine-tuning at the preset's lambda = 0.08, `gsb_mdpo:scratch` a fresh actor, "
    "`gaussian_ppo:demonstrator-continued` the demonstrator's recipe rerun from scratch for 300k steps (its "
    "200k and the same 100k; not the demonstrator's own run resumed: its seed 0 follows another curve). The "
    "budget table counts the demonstrator's and the demonstrations' env steps",
    pretraining=_FINETUNE_PRETRAINING,
    kind="finetune",
)
