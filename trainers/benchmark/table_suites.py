"""The suites of the paper's return tables (Tables 1-2): at the paper's scale (GPU) and on a 2-core CPU, with
the settings the other CPU suites share (geometry, evaluation, reference columns)."""

from .suite_types import PAPER_METHODS, Suite, Variant, methods

PLAYGROUND_PROTOCOL = (
    "128 fresh envs x one 1000-step episode, deterministic (ODE / Gaussian mean), 10 evaluations"
)
GYM_PROTOCOL = "10 episodes in a vector env, deterministic (ODE / Gaussian mean), every 1M env steps"

# CPU geometry for Gymnasium tasks: 32 envs x 64 steps = 2048 transitions, 4 minibatches x 512, 4 epochs.
# The update's cost per env step (epochs x forward/backward per sample) is the paper's; only the batch is
# smaller, which gives more iterations per env step at this budget.
CPU_GYM_GEOMETRY = (
    "--rollout.num-envs",
    "32",
    "--rollout.unroll-length",
    "64",
    "--rollout.num-minibatches",
    "4",
    "--rollout.epochs",
    "4",
)
CPU_GYM_TASKS = ("Hopper-v5", "HalfCheetah-v5", "Walker2d-v5", "Swimmer-v5")
# Tuned SB3 PPO as a reference column: its own preset and geometry, the suite's evaluation.
ZOO_COLUMN = Variant("sb3_ppo:zoo", "ppo", preset="zoo", shared_geometry=False)
# FPO++ as a reference column: its preset (FlowRL's column on Gym, Table 1's FPO column with FPO++'s objective
# on Playground) in the suite's geometry, like a paper column, but judged only against GSB-MDPO.
FPO_PP_COLUMN = Variant("fpo_pp", "fpo_pp")
CPU_GYM_EVAL = ("--eval.interval-steps", "0", "--eval.num-evals", "10")
CPU_GYM_PROTOCOL = "10 episodes in a vector env, deterministic (ODE / Gaussian mean), 10 evaluations"
"""What `CPU_GYM_EVAL` gives every column of the CPU Gymnasium suites."""
# CPU geometry for Playground tasks: 256 envs x 30 steps x 4 unrolls, 8 minibatches of 128 sequences, 16 epochs.
_CPU_PLAYGROUND_GEOMETRY = (
    "--rollout.num-envs",
    "256",
    "--rollout.unrolls-per-iteration",
    "4",
    "--rollout.num-minibatches",
    "8",
    "--eval.num-envs",
    "32",
)

TABLE_SUITES = (
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
        variants=methods(*PAPER_METHODS),
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
        variants=methods(*PAPER_METHODS),
        eval_protocol=GYM_PROTOCOL,
        budget_note="the paper's budget; needs a GPU",
    ),
    Suite(
        name="cpu-gym",
        description="Four Gymnasium MuJoCo v5 tasks on a 2-core CPU; each method's Table 2 column with a "
        "smaller rollout geometry, both published forms of FPO and DPPO, and FPO++ and tuned SB3 PPO for "
        "reference.",
        tasks=CPU_GYM_TASKS,
        total_steps=1_000_000,
        seeds=(0, 1, 2),
        preset="gym",
        variants=(
            *methods("gaussian_ppo", "dppo"),
            Variant("dppo:clamp-mean", "dppo", ("--algo.no-log-prob-clamp-per-dim",)),
            Variant("fpo", "fpo"),
            Variant("fpo:flowrl", "fpo", ("--algo.positive-advantages-only",)),
            *methods("genpo", "gsb_mdpo"),
            FPO_PP_COLUMN,
            ZOO_COLUMN,
        ),
        args=CPU_GYM_GEOMETRY,
        eval_args=CPU_GYM_EVAL,
        eval_protocol=CPU_GYM_PROTOCOL,
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
        variants=(*methods(*PAPER_METHODS), FPO_PP_COLUMN),
        args=_CPU_PLAYGROUND_GEOMETRY,
        eval_protocol="32 fresh envs x one 1000-step episode, deterministic (ODE / Gaussian mean), 10 evaluations",
        budget_note="3M env steps: 1/20 of the paper's budget, sized so that one run of every method but GenPO "
        "takes about 30 min on 2 cores; the per-task cost tables below give each run's measured minutes (the "
        "fastest run: runs that shared the machine took longer). Some runs ran on a GPU machine: the hardware "
        "line counts them, and each machine has its own cost table",
    ),
)
"""Paper Tables 1-2 at the paper's settings, and each on a CPU."""
