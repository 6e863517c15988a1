"""The Python training API: `trainers.<algorithm>.train(env, preset="cpu", **overrides)`, beside the CLI.

It builds the same config the CLI would (`--preset NAME --env ENV` then overrides), runs the same trainer
(run folder, checkpoints, evaluation, `--resume` as `resume=True`) and returns the trained policy loaded as
a `GSBPolicy`, whose `name_or_path` is the policy folder inside the run folder.

`env` may be:
- a Gymnasium id ("Hopper-v5"), or "module:Env-v0" (the module is imported first, so that it can register
  its envs, as `gymnasium.make` does);
- a MuJoCo Playground dm_control_suite task name ("CartpoleSwingup");
- a callable returning a new `gymnasium.Env` (a class, a function): it is registered with Gymnasium as
  "custom/<name>-v0" for this process, and trains through the Gymnasium path like any registered id. Where
  another process can import it, it is registered by its `module:Class` entry point (gymnasium's
  convention), which the policy's results.json records (`env_entry_point`) so that `evaluate` and the
  publisher can make the env again in a new process; a class of a script run as `__main__` cannot be, and
  results.json records `__main__:Class`, which they name when they say how to pass the env instead.
"""

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gsbpolicy.gym import CUSTOM_NAMESPACE, entry_point_of, importable


def _is_env_instance(env) -> bool:
    import gymnasium

    return isinstance(env, gymnasium.Env)


def register_env(factory: Callable[..., Any]) -> str:
    """Register `factory` with Gymnasium as "custom/<name>-v0" (the name from its `__name__`) and return
    the id; registering the same callable twice gives the same id, another callable of that name is
    refused."""
    import gymnasium

    if _is_env_instance(factory):
        raise ValueError(
            "env: pass a callable that makes a new env (its class, or a function), not an env instance: "
            "training steps several copies of it"
        )
    name = getattr(factory, "__name__", type(factory).__name__).strip("_<>") or "Env"
    env_id = f"{CUSTOM_NAMESPACE}/{name}-v0"
    entry_point = entry_point_of(factory) if hasattr(factory, "__qualname__") else None
    # By name where another process can import it: the id is then makeable there too (and picklable).
    entry = entry_point if entry_point and importable(entry_point, factory) else factory
    spec = gymnasium.registry.get(env_id)
    if spec is None:
        gymnasium.register(env_id, entry_point=entry)
    elif spec.entry_point is not entry and spec.entry_point != entry:
        raise ValueError(f"env: another callable is already registered as {env_id}; give yours another name")
    return env_id


def resolve_env(env: str | Callable[..., Any]) -> str:
    """The env id a config records for `env` (see the module docstring); the config's validation then
    checks it (and imports a "module:" prefix)."""
    if isinstance(env, str):
        return env
    if callable(env) or _is_env_instance(env):
        return register_env(env)  # refuses an instance with the reason
    raise ValueError(
        f"env: expected an env id or a callable returning a gymnasium.Env, got {type(env).__name__}"
    )


def with_overrides(args, overrides: dict[str, Any]):
    """`args` with top-level fields replaced and groups updated from dicts (`rollout={"num_envs": 8}`) or
    replaced by instances; an unknown name is refused with the valid ones."""
    fields = {f.name: f for f in dataclasses.fields(args)}
    changes = {}
    for name, value in overrides.items():
        if name not in fields:
            raise ValueError(f"unknown option {name!r}; options: {', '.join(sorted(fields))}")
        current = getattr(args, name)
        if isinstance(value, dict) and dataclasses.is_dataclass(current):
            known = {f.name for f in dataclasses.fields(current)}
            if unknown := sorted(set(value) - known):
                raise ValueError(
                    f"unknown {name} option(s) {unknown}; {name} options: {', '.join(sorted(known))}"
                )
            value = dataclasses.replace(current, **value)
        changes[name] = Path(value) if name == "output_dir" and value is not None else value
    return dataclasses.replace(args, **changes)


def train(presets: dict, make_trainer, env, preset: str, overrides: dict[str, Any]):
    """Build the config from `presets[preset]` for `env` plus `overrides`, train with `make_trainer(args)`
    and return the policy folder loaded as a `GSBPolicy`."""
    from gsbpolicy import GSBPolicy

    from .cli import saved_line

    if preset not in presets:
        raise ValueError(f"unknown preset {preset!r}; presets: {', '.join(sorted(presets))}")
    env_id = resolve_env(env)
    args = with_overrides(presets[preset](env_id), {"env": env_id, **overrides})
    args.validate()
    result = make_trainer(args).run()
    policy_dirs = result if isinstance(result, list) else [result]  # several `seeds`: one policy per seed
    for policy_dir in policy_dirs:
        print(saved_line(policy_dir), flush=True)
    policies = [GSBPolicy.from_pretrained(policy_dir) for policy_dir in policy_dirs]
    return policies if isinstance(result, list) else policies[0]


TRAIN_DOC = """Train `{name}` on `env` from Python and return the policy as a `GSBPolicy`; the run folder is the CLI's.

    `env`: a Gymnasium id, "module:Env-v0", a Playground task name, or a callable returning a `gymnasium.Env`.
    `preset`: {presets}. `overrides`: the CLI's fields, top-level (`total_steps=...`, `seed=...`,
    `output_dir=...`, `resume=True`) or per group as a dict (`rollout={{"num_envs": 8}}`, `algo={{...}}`).
    """


def entry_points(name: str, args_type: type, presets: dict, doc: str, make_trainer):
    """`train(env, preset="cpu", **overrides)` (the Python API) and `main(argv)` (the command line) of the
    trainer registered as `name`, whose configuration is `args_type` (starting from `presets`, described by its
    module docstring `doc`) and whose runs `make_trainer(args)` builds. A trainer module ends with
    `train, main = entry_points(...)`, so that its own file holds only what is its own."""
    from . import cli
    from .runlog import module_name

    def train_api(env, preset: str = "cpu", **overrides):
        return train(presets, make_trainer, env, preset, overrides)

    def main(argv=None):
        return cli.train_main(args_type, presets, make_trainer, doc, argv)

    train_api.__doc__ = TRAIN_DOC.format(name=name, presets=", ".join(map(repr, presets)))
    for function, public in ((train_api, "train"), (main, "main")):
        function.__name__ = function.__qualname__ = public
        function.__module__ = args_type.__module__
    main.__doc__ = f"The command line `python -m {module_name(args_type)}` (argv: its arguments)."
    return train_api, main


def loop_entry_points(algorithm: type, args_type: type, presets: dict, doc: str):
    """`entry_points` for an algorithm of the shared training loop (`algorithm(args.algo)` is its instance)."""
    from . import cli

    return entry_points(
        algorithm.name, args_type, presets, doc, lambda args: cli.loop_trainer(algorithm(args.algo), args)
    )
