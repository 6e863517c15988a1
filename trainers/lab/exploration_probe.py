"""Is a task's reward out of reach, or only out of the way? A probe of one Playground task through the
trainers' own env (`PlaygroundEnv`: MJX impl="jax", the Playground preset's time limit and action repeat).

Why: on BallInCup most cpu-playground runs return exactly 0 at every evaluation of their 3M env steps (the
first runs of every method all did). Two causes would read the same in the tables: a reward that no
policy reaches through this env (a bug in the env path), or one that the training runs never stumble on
(every method here draws each action with fresh noise, so it explores like a random policy until the first
reward arrives). The probe tells them apart with two policy families:

- `random`: `episodes` episodes of i.i.d. uniform actions over the whole actuator range.
- `swing`: one episode per open-loop periodic policy on a grid of frequencies x phases: the first actuator
  follows a sine wave with the phase, every other actuator a square wave of the same frequency, both over
  the whole range. On BallInCup (actuators: cup x, cup z) it swings the ball and lifts the cup once a period.

A swing that scores while random actions never do says the reward is reachable and the zeros are an
exploration failure at the budget.

    python -m trainers.lab.exploration_probe [--env BallInCup]

Prints both families' returns and writes them to hub_cards/results/exploration_probe.json (one entry per
env; a rerun replaces its env's entry). The benchmark tables of every suite that ran the task quote it.
"""

import dataclasses
import json
import math
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from gsbpolicy._cli import FAILURE, USAGE
from gsbpolicy._files import atomic_write_text
from trainers import presets
from trainers._core.cli import fail, tyro_cli
from trainers._core.envs.playground_env import PlaygroundEnv
from trainers.benchmark.aggregate import PROBE_FILE, RESULTS_DIR, read_probes


@dataclasses.dataclass(frozen=True)
class Args:
    """Exploration probe of one Playground task."""

    env: str = "BallInCup"
    """Playground task (the time limit and action repeat are the `playground` preset's)."""
    episodes: int = 32
    """Episodes of i.i.d. uniform random actions."""
    frequencies_hz: tuple[float, ...] = (0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0)
    """Frequencies of the open-loop swings, in cycles per simulated second."""
    phases: int = 4
    """Phases of the first actuator's sine per frequency, evenly spaced over one period."""
    seed: int = 0
    """Seed of the random actions and of the env's first states."""
    out: Path | None = RESULTS_DIR / PROBE_FILE
    """JSON file the result is merged into (keyed by env); None only prints."""


def swing_actions(
    freqs_hz: np.ndarray, phases: np.ndarray, steps: int, dt: float, act_dim: int
) -> np.ndarray:
    """Open-loop swings in [-1, 1], [steps, B, act_dim]: actuator 0 is sin(2 pi f t + phase), the others
    sign(sin(2 pi f t)), with t the simulated time at each agent step."""
    t = np.arange(steps)[:, None] * dt
    angle = 2 * np.pi * freqs_hz[None, :] * t
    first = np.sin(angle + phases[None, :])
    rest = np.repeat(np.sign(np.sin(angle))[..., None], act_dim - 1, axis=-1)
    return np.concatenate([first[..., None], rest], axis=-1).astype(np.float32)


def episode_returns(env: PlaygroundEnv, actions: jax.Array, key: jax.Array) -> np.ndarray:
    """Each env's return over one episode of `actions` [steps, B, act_dim] in [-1, 1], mapped onto the
    actuator range; the time limit ends it (no Playground task here terminates but on divergence)."""
    low, high = jnp.asarray(env.action_low)[None], jnp.asarray(env.action_high)[None]  # [1, act_dim]

    def step(carry, action):
        state, total = carry
        state, ts = env.step(state, low + (action + 1) / 2 * (high - low))
        return (state, total + ts.reward), None

    state, _ = env.reset(key)
    (_, total), _ = jax.jit(lambda s, a: jax.lax.scan(step, (s, jnp.zeros(env.num_envs)), a))(state, actions)
    return np.asarray(total, np.float64)


def _family(returns: np.ndarray) -> dict:
    return {
        "episodes": int(returns.size),
        "mean": float(returns.mean()),
        "max": float(returns.max()),
        "rewarded_episodes": int((returns > 0).sum()),
    }


def probe(args: Args) -> dict:
    """Both families' returns on `args.env` (the entry `exploration_probe.json` keeps for it)."""
    if args.episodes < 1 or args.phases < 1 or not args.frequencies_hz:
        raise ValueError(
            f"need episodes >= 1, phases >= 1 and at least one frequency, got {args.episodes}, "
            f"{args.phases}, {args.frequencies_hz}"
        )
    if min(args.frequencies_hz) <= 0:
        raise ValueError(f"frequencies must be positive, got {args.frequencies_hz}")
    rollout = presets.playground(args.env).rollout
    steps = rollout.episode_length // rollout.action_repeat
    grid = [(f, 2 * math.pi * k / args.phases) for f in args.frequencies_hz for k in range(args.phases)]
    # One batch, one compiled scan: the random episodes first, then one env per swing.
    env = PlaygroundEnv.make(
        args.env, args.episodes + len(grid), rollout.episode_length, rollout.action_repeat
    )
    dt = float(env.env.dt) * rollout.action_repeat
    random_key, reset_key = jax.random.split(jax.random.key(args.seed))
    uniform = jax.random.uniform(random_key, (steps, args.episodes, env.act_dim), minval=-1.0, maxval=1.0)
    freqs, phases = (np.array(column) for column in zip(*grid, strict=True))
    swing = jnp.asarray(swing_actions(freqs, phases, steps, dt, env.act_dim))
    returns = episode_returns(env, jnp.concatenate([uniform, swing], axis=1), reset_key)
    random_returns, swing_returns = returns[: args.episodes], returns[args.episodes :]
    best = int(np.argmax(swing_returns))
    return {
        "env": args.env,
        "episode_length": rollout.episode_length,
        "action_repeat": rollout.action_repeat,
        "agent_dt_s": dt,
        "seed": args.seed,
        "random": _family(random_returns),
        "swing": {
            **_family(swing_returns),
            "frequencies_hz": list(args.frequencies_hz),
            "phases": args.phases,
            "returns": [round(float(r), 1) for r in swing_returns],
            "best": {
                "frequency_hz": grid[best][0],
                "phase": grid[best][1],
                "return": float(swing_returns[best]),
            },
        },
    }


def main(argv=None) -> None:
    args = tyro_cli(Args, args=argv, description=__doc__, prog="python -m trainers.lab.exploration_probe")
    try:
        entries = {} if args.out is None else read_probes(args.out)
    except (ValueError, OSError) as err:
        fail(str(err), FAILURE)
    start = time.perf_counter()
    try:
        entry = probe(args)
    except ValueError as err:
        fail(str(err), USAGE)
    print(
        f"{args.env}: random actions mean {entry['random']['mean']:g} "
        f"({entry['random']['rewarded_episodes']}/{args.episodes} episodes rewarded); "
        f"swings: {entry['swing']['rewarded_episodes']}/{entry['swing']['episodes']} rewarded, best "
        f"{entry['swing']['best']['return']:g} at {entry['swing']['best']['frequency_hz']:g} Hz "
        f"({time.perf_counter() - start:.0f} s)"
    )
    if args.out is not None:
        try:
            atomic_write_text(
                args.out, json.dumps({**entries, args.env: entry}, indent=1, sort_keys=True) + "\n"
            )
        except OSError as err:
            fail(str(err), FAILURE)
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
