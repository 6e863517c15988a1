"""The compute suites: the paper's Table 3 layout (wall-clock and memory relative to same-pipeline Gaussian
PPO), on a CPU and on a GPU machine."""

from .suite_types import PAPER_METHODS, Suite, methods
from .table_suites import GYM_PROTOCOL, PLAYGROUND_PROTOCOL

COMPUTE_CPU = Suite(
    name="compute-cpu",
    description="Paper Table 3 layout on HalfCheetah-v5: every method's Table 2 column and geometry "
    "(1024 envs x 24 steps), same env-step budget, one seed, run one after another on this machine.",
    tasks=("HalfCheetah-v5",),
    total_steps=98_304,
    seeds=(0,),
    preset="gym",
    variants=methods(*PAPER_METHODS),
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
)
COMPUTE_GPU_PLAYGROUND = Suite(
    name="compute-gpu-playground",
    description="Table 3 layout on a Playground task: every method's Table 1 column and geometry "
    "(2048 envs, 983,040 env steps per iteration), two iterations each, for a GPU machine.",
    tasks=("CartpoleSwingup",),
    total_steps=2 * 983_040,
    seeds=(0,),
    preset="playground",
    variants=methods(*PAPER_METHODS),
    eval_args=("--eval.num-evals", "1"),
    eval_protocol=PLAYGROUND_PROTOCOL.replace("10 evaluations", "one evaluation at the end"),
    budget_note="two iterations of the paper's geometry; wall-clock includes compilation",
    kind="compute",
)
COMPUTE_GPU = Suite(
    name="compute-gpu",
    description="Paper Table 3 layout on HalfCheetah-v5 with the paper's geometry, for a GPU machine.",
    tasks=("HalfCheetah-v5",),
    total_steps=5_013_504,
    seeds=(0,),
    preset="gym",
    variants=methods(*PAPER_METHODS),
    eval_protocol=GYM_PROTOCOL,
    budget_note="the paper's 5M env steps",
    kind="compute",
)
