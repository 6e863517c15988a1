"""The ablation suites: the paper's Section 5.3 ablations and the runs that look for the causes of a gap in
cpu-gym (learning-rate schedule, budget in updates, sampler, SB3's geometry), each in cpu-gym's settings."""

from .suite_types import Suite, Variant
from .table_suites import CPU_GYM_EVAL, CPU_GYM_GEOMETRY, CPU_GYM_PROTOCOL, CPU_GYM_TASKS, ZOO_COLUMN

# The paper's Gym run counted in gradient updates: 40M env steps in iterations of 1024 envs x 24 steps (1,628 of
# them, rounded up as the trainers round), each 4 epochs x 4 minibatches = 16 updates, as cpu-gym's are.
PAPER_GYM_ITERATIONS = -(-40_000_000 // (1024 * 24))
_CPU_GYM_STEPS_PER_ITERATION = 32 * 64
PAPER_UPDATES_ARGS = ("--optim.cosine-decay-steps", str(PAPER_GYM_ITERATIONS * _CPU_GYM_STEPS_PER_ITERATION))
"""GSB-MDPO's cosine laid out over the paper's number of gradient updates in cpu-gym's geometry (3,334,144 env
steps): at every update its learning rate is the paper's run's at the same update; a 1M-step run stops after
489 of the 1,628 iterations, 30% of the way, at 79% of the peak rate (cpu-gym's own run has decayed to 0)."""

ABLATIONS = (
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
            Variant("lambda=0,eta=0", "gsb_mdpo", ("--algo.kl-coef", "0", "--algo.ref-mix", "0"), "eta=0"),
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
        args=CPU_GYM_GEOMETRY,
        eval_args=CPU_GYM_EVAL,
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
        args=CPU_GYM_GEOMETRY,
        eval_args=CPU_GYM_EVAL,
        eval_protocol=CPU_GYM_PROTOCOL,
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
        args=CPU_GYM_GEOMETRY,
        eval_args=CPU_GYM_EVAL,
        eval_protocol=CPU_GYM_PROTOCOL,
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
        args=CPU_GYM_GEOMETRY,
        eval_args=CPU_GYM_EVAL,
        eval_protocol=CPU_GYM_PROTOCOL,
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
        tasks=CPU_GYM_TASKS,
        total_steps=1_000_000,
        seeds=(0, 1, 2),
        preset="gym",
        variants=(
            Variant("gsb_mdpo", "gsb_mdpo"),
            Variant("gaussian_ppo", "gaussian_ppo"),
            ZOO_COLUMN,
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
        args=CPU_GYM_GEOMETRY,
        eval_args=CPU_GYM_EVAL,
        eval_protocol=CPU_GYM_PROTOCOL,
        budget_note="1M env steps, as cpu-gym",
        kind="ablation",
    ),
)
"""Ablations of GSB-MDPO and of the reference columns, each variant judged against its control."""
