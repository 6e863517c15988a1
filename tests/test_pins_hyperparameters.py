"""Pins of every method's presets, field by field: the paper's Table 1 (Playground) and Table 2 (Gymnasium)
columns, and where a table is silent, our stated choice (marked "ours"). The shared rollout setups
(`trainers.presets.playground` / `gym`) are pinned by test_trainer's table test; this file pins what each
algorithm file itself sets, so that a mutation of any one constant there fails a test."""

import dataclasses
import importlib
import types

import pytest

from trainers.gsb_mdpo import GsbMdpoArgs, cpu_preset, gym_preset, playground_preset


def fields(args, group: str) -> dict:
    return dataclasses.asdict(getattr(args, group))


def test_playground_preset_is_table_1s_gsb_mdpo_column():
    args = playground_preset("BallInCup")
    assert args.env == "BallInCup" and playground_preset(None).env == "CartpoleSwingup"
    assert fields(args, "policy") == {
        "num_steps": 8,  # generation steps
        "width": 32,  # MLP 4 x 32
        "depth": 4,
        "activation": "silu",  # ours (the table names no activation for Playground)
        "time_embedding": "sinusoidal",  # ours
        "time_embed_dim": 8,
        "output_scale": 0.25,
        "sigma_schedule": "exponential",
        "sigma_max": 3.0,
        "sigma_min": 1.0,
        "squash": "tanh",  # ours: Playground actions live in [-1, 1]
    }
    assert fields(args, "critic") == {"width": 256, "depth": 5, "activation": "silu"}  # 5 x 256; silu ours
    assert fields(args, "optim") == {
        "actor_lr": 1e-3,
        "critic_lr": 1e-3,
        "actor_cosine_decay": False,
        "critic_cosine_decay": False,
        "cosine_decay_steps": None,  # a decay, where on, spans the run
        "max_grad_norm": None,  # the table gives no gradient clip for Playground
        "value_coef": 0.1,
    }
    assert fields(args, "algo") == {"kl_coef": 0.8, "ref_mix": 0.0, "step_clip": 0.1, "path_clip": 0.3}


def test_gym_preset_is_table_2s_gsb_mdpo_column():
    args = gym_preset("Hopper-v5")
    assert args.env == "Hopper-v5" and gym_preset(None).env == "HalfCheetah-v5"
    assert fields(args, "policy") == {
        "num_steps": 16,
        "width": 256,  # 3 x 256
        "depth": 3,
        "activation": "silu",
        "time_embedding": "fourier",  # ours: FlowRL's learnable Fourier features
        "time_embed_dim": 16,
        "output_scale": 0.25,
        "sigma_schedule": "linear",
        "sigma_max": 3.0,
        "sigma_min": 0.3,
        "squash": "clip",  # ours
    }
    assert fields(args, "critic") == {"width": 256, "depth": 3, "activation": "elu"}
    assert fields(args, "optim") == {
        "actor_lr": 7.5e-4,
        "critic_lr": 1e-3,
        "actor_cosine_decay": True,  # the text under Table 2: a cosine decay to zero
        "critic_cosine_decay": False,
        "cosine_decay_steps": None,  # a decay, where on, spans the run
        "max_grad_norm": 1.0,
        "value_coef": 1.0,
    }
    assert fields(args, "algo") == {"kl_coef": 0.08, "ref_mix": 0.02, "step_clip": 0.1, "path_clip": 0.4}


def test_fpo_pp_cli_defaults_are_fpo_pp_codes_objective():
    """FPO++'s code's objective (ASPO at eps 0.05, 16 draws, sum / sqrt(d), uniform t, its bounds), the sampler
    options off."""
    from trainers.fpo_pp import FppArgs

    assert dataclasses.asdict(FppArgs()) == {
        "num_samples": 16, "clip": 0.05, "trust_region": "aspo", "loss_reduction": "sqrt", "time_beta": 1.0,
        "loss_clamp": 20.0, "negative_advantage_loss_clamp": 20.0, "log_ratio_clamp": 10.0, "advantage_clamp": 100.0,
        "additive_noise": 0.0, "action_clip": None, "time_reversed": False, "clip_iterates": False,
    }  # fmt: skip


def test_the_cli_defaults_are_table_2s_coefficients():
    assert dataclasses.asdict(GsbMdpoArgs()) == {
        "kl_coef": 0.08,
        "ref_mix": 0.02,
        "step_clip": 0.1,
        "path_clip": 0.4,
    }


def test_cpu_preset_is_the_small_inverted_pendulum_run():
    args = cpu_preset(None)
    assert (args.env, args.total_steps, args.preset) == ("InvertedPendulum-v5", 150_000, "cpu")
    assert cpu_preset("Hopper-v5").env == "Hopper-v5"
    rollout = fields(args, "rollout")
    assert (rollout["num_envs"], rollout["unroll_length"], rollout["num_minibatches"], rollout["epochs"]) == (
        32,
        32,
        8,
        8,
    )
    # The default for any env (issue 47): rewards scaled by the running return std, the paper's learning
    # rates, gradient clipping, the Playground table's sigmas and its path-KL coefficient (the rest Table 2's).
    assert rollout["normalize_rewards"] and (rollout["gamma"], rollout["gae_lambda"]) == (0.99, 0.95)
    # Not the paper's: the sampling noise held for 4 steps in rollouts for the first 50k env steps (MountainCar's
    # goal, the double integrator's late refinement; docs/own-env.md); the paper's presets draw it every step.
    assert (rollout["noise_hold"], rollout["noise_hold_steps"]) == (4, 50_000)
    assert all(fields(p(None), "rollout")["noise_hold"] == 1 for p in (gym_preset, playground_preset))
    optim = fields(args, "optim")
    assert (optim["actor_lr"], optim["critic_lr"], optim["max_grad_norm"]) == (1e-3, 1e-3, 0.5)
    policy = fields(args, "policy")
    assert (policy["sigma_schedule"], policy["sigma_max"], policy["sigma_min"], policy["squash"]) == (
        "exponential",
        3.0,
        1.0,
        "tanh",
    )
    assert fields(args, "algo") == {"kl_coef": 0.8, "ref_mix": 0.02, "step_clip": 0.1, "path_clip": 0.4}


# The baselines' columns. Groups a method does not use are left out (Gaussian PPO's actor is `algo`'s MLP; its
# `policy` group is unused). Each value was checked against the tables; "ours" where they are silent.
BASELINES = {
    ("gaussian_ppo", "playground"): {
        "critic": {"width": 256, "depth": 5, "activation": "silu"},
        "optim": {"actor_lr": 3e-4, "critic_lr": 3e-4, "actor_cosine_decay": False, "critic_cosine_decay": False,
                  "cosine_decay_steps": None,
                  "max_grad_norm": None, "value_coef": 0.25},
        # MLP 4 x 32, clip 0.1, entropy 0; state-dependent std, tanh squash and silu: ours (Brax PPO's).
        "algo": {"clip": 0.1, "entropy_coef": 0.0, "width": 32, "depth": 4, "activation": "silu", "std": "state",
                 "squash": "tanh", "init_log_std": 0.0, "min_std": 0.001},
    },
    ("gaussian_ppo", "gym"): {
        "critic": {"width": 256, "depth": 3, "activation": "elu"},
        "optim": {"actor_lr": 1e-4, "critic_lr": 1e-3, "actor_cosine_decay": False, "critic_cosine_decay": False,
                  "cosine_decay_steps": None,
                  "max_grad_norm": 1.0, "value_coef": 1.0},
        "algo": {"clip": 0.2, "entropy_coef": 0.0, "width": 256, "depth": 3, "activation": "elu", "std": "param",
                 "squash": "clip", "init_log_std": 0.0, "min_std": 0.001},
    },
    ("dppo", "playground"): {
        # Constant sigma: the table's per-step std 0.05 is sigma * sqrt(dt) with dt = 1/10.
        "policy": {"num_steps": 10, "width": 32, "depth": 4, "activation": "silu", "time_embedding": "sinusoidal",
                   "time_embed_dim": 8, "output_scale": 0.25, "sigma_schedule": "constant",
                   "sigma_max": 0.05 / 0.1**0.5, "sigma_min": 0.5, "squash": "tanh"},
        "critic": {"width": 256, "depth": 5, "activation": "silu"},
        "optim": {"actor_lr": 3e-4, "critic_lr": 3e-4, "actor_cosine_decay": False, "critic_cosine_decay": False,
                  "cosine_decay_steps": None,
                  "max_grad_norm": None, "value_coef": 0.25},
        "algo": {"clip": 0.2, "log_prob_reduction": "sum", "log_prob_clamp": None, "log_prob_clamp_per_dim": False,
                 "denoise_gamma": 1.0, "noise_clip": None, "time_reversed": True, "ddpm": False},
    },
    ("dppo", "gym"): {
        # Cosine DDPM with the posterior std floored at 0.1 (sigma_min), time embedding 32, no output scale.
        "policy": {"num_steps": 10, "width": 256, "depth": 3, "activation": "silu", "time_embedding": "fourier",
                   "time_embed_dim": 32, "output_scale": 1.0, "sigma_schedule": "exponential", "sigma_max": 1.0,
                   "sigma_min": 0.1, "squash": "clip"},
        "critic": {"width": 256, "depth": 3, "activation": "elu"},
        "optim": {"actor_lr": 1e-3, "critic_lr": 1e-3, "actor_cosine_decay": False, "critic_cosine_decay": False,
                  "cosine_decay_steps": None,
                  "max_grad_norm": 1.0, "value_coef": 1.0},
        # Official DPPO: each dimension's log-density clamped to [-5, 2], then averaged; gamma_denoise 0.99.
        "algo": {"clip": 0.2, "log_prob_reduction": "mean", "log_prob_clamp": (-5.0, 2.0),
                 "log_prob_clamp_per_dim": True, "denoise_gamma": 0.99, "noise_clip": 3.0, "time_reversed": True,
                 "ddpm": True},
    },
    ("fpo", "playground"): {
        "policy": {"num_steps": 10, "width": 32, "depth": 4, "activation": "silu", "time_embedding": "sinusoidal",
                   "time_embed_dim": 8, "output_scale": 0.25, "sigma_schedule": "constant", "sigma_max": 0.0,
                   "sigma_min": 0.5, "squash": "tanh"},
        "critic": {"width": 256, "depth": 5, "activation": "silu"},
        "optim": {"actor_lr": 3e-4, "critic_lr": 3e-4, "actor_cosine_decay": False, "critic_cosine_decay": False,
                  "cosine_decay_steps": None,
                  "max_grad_norm": None, "value_coef": 0.25},
        "algo": {"num_samples": 8, "clip": 0.05, "additive_noise": 0.0, "positive_advantages_only": False,
                 "time_reversed": True, "clip_iterates": False},
    },
    ("fpo", "gym"): {
        "policy": {"num_steps": 10, "width": 256, "depth": 3, "activation": "silu", "time_embedding": "fourier",
                   "time_embed_dim": 16, "output_scale": 0.25, "sigma_schedule": "constant", "sigma_max": 0.0,
                   "sigma_min": 0.5, "squash": "clip"},
        "critic": {"width": 256, "depth": 3, "activation": "elu"},
        "optim": {"actor_lr": 1e-4, "critic_lr": 1e-3, "actor_cosine_decay": False, "critic_cosine_decay": False,
                  "cosine_decay_steps": None,
                  "max_grad_norm": 1.0, "value_coef": 1.0},
        # The FPO paper's surrogate: both advantage signs (FlowRL's positive-only form is a suite variant).
        "algo": {"num_samples": 8, "clip": 0.05, "additive_noise": 0.1, "positive_advantages_only": False,
                 "time_reversed": False, "clip_iterates": True},
    },
    # FPO++: Table 1's FPO column (its networks, learning rates, sampler, N_mc and eps) with FPO++'s objective.
    ("fpo_pp", "playground"): {
        "policy": {"num_steps": 10, "width": 32, "depth": 4, "activation": "silu", "time_embedding": "sinusoidal",
                   "time_embed_dim": 8, "output_scale": 0.25, "sigma_schedule": "constant", "sigma_max": 0.0,
                   "sigma_min": 0.5, "squash": "tanh"},
        "critic": {"width": 256, "depth": 5, "activation": "silu"},
        "optim": {"actor_lr": 3e-4, "critic_lr": 3e-4, "actor_cosine_decay": False, "critic_cosine_decay": False,
                  "cosine_decay_steps": None,
                  "max_grad_norm": None, "value_coef": 0.25},
        "algo": {"num_samples": 8, "clip": 0.05, "trust_region": "aspo", "loss_reduction": "sqrt", "time_beta": 1.0,
                 "loss_clamp": 20.0, "negative_advantage_loss_clamp": 20.0, "log_ratio_clamp": 10.0,
                 "advantage_clamp": 100.0, "additive_noise": 0.0, "action_clip": None, "time_reversed": True,
                 "clip_iterates": False},
    },
    # FlowRL's FPO++ (after its June 2026 refactor) on Table 2's shared rows: 64 steps, ELU, no output scale,
    # 16 draws, action noise 0.02 and a +-2 action clip instead of the per-iterate clip.
    ("fpo_pp", "gym"): {
        "policy": {"num_steps": 64, "width": 256, "depth": 3, "activation": "elu", "time_embedding": "fourier",
                   "time_embed_dim": 16, "output_scale": 1.0, "sigma_schedule": "constant", "sigma_max": 0.0,
                   "sigma_min": 0.5, "squash": "clip"},
        "critic": {"width": 256, "depth": 3, "activation": "elu"},
        "optim": {"actor_lr": 1e-4, "critic_lr": 1e-3, "actor_cosine_decay": False, "critic_cosine_decay": False,
                  "cosine_decay_steps": None,
                  "max_grad_norm": 1.0, "value_coef": 1.0},
        "algo": {"num_samples": 16, "clip": 0.05, "trust_region": "aspo", "loss_reduction": "sqrt", "time_beta": 1.0,
                 "loss_clamp": 20.0, "negative_advantage_loss_clamp": 20.0, "log_ratio_clamp": 10.0,
                 "advantage_clamp": 100.0, "additive_noise": 0.02, "action_clip": 2.0, "time_reversed": False,
                 "clip_iterates": False},
    },
    ("genpo", "playground"): {
        "policy": {"num_steps": 5, "width": 64, "depth": 3, "activation": "silu", "time_embedding": "fourier",
                   "time_embed_dim": 32, "output_scale": 1.0, "sigma_schedule": "exponential", "sigma_max": 1.0,
                   "sigma_min": 0.5, "squash": "tanh"},
        "critic": {"width": 256, "depth": 5, "activation": "silu"},
        "optim": {"actor_lr": 3e-4, "critic_lr": 3e-4, "actor_cosine_decay": False, "critic_cosine_decay": False,
                  "cosine_decay_steps": None,
                  "max_grad_norm": None, "value_coef": 1.0},
        "algo": {"clip": 0.2, "flow_mix": 0.9, "compress_coef": 0.01, "entropy_coef": 0.0},
    },
    ("genpo", "gym"): {
        "policy": {"num_steps": 16, "width": 256, "depth": 3, "activation": "silu", "time_embedding": "fourier",
                   "time_embed_dim": 16, "output_scale": 0.25, "sigma_schedule": "exponential", "sigma_max": 1.0,
                   "sigma_min": 0.5, "squash": "clip"},
        "critic": {"width": 256, "depth": 3, "activation": "elu"},
        "optim": {"actor_lr": 1e-3, "critic_lr": 1e-3, "actor_cosine_decay": False, "critic_cosine_decay": False,
                  "cosine_decay_steps": None,
                  "max_grad_norm": 1.0, "value_coef": 1.0},
        "algo": {"clip": 0.2, "flow_mix": 0.9, "compress_coef": 0.01, "entropy_coef": 0.0},
    },
}  # fmt: skip


@pytest.mark.parametrize(("method", "preset"), sorted(BASELINES), ids=lambda x: x)
def test_baseline_columns_are_their_table_values(method, preset):
    args = importlib.import_module(f"trainers.{method}").PRESETS[preset](
        "Hopper-v5" if preset == "gym" else "BallInCup"
    )
    for group, expected in BASELINES[method, preset].items():
        # Exact: the presets write the tables' literals (pytest.approx would also refuse the nested
        # tuple of DPPO's log_prob_clamp since pytest 9.2).
        assert fields(args, group) == expected, (method, preset, group)


ALGORITHMS = {
    "gsb_mdpo": "GsbMdpo",
    "gaussian_ppo": "GaussianPpo",
    "dppo": "Dppo",
    "fpo": "Fpo",
    "fpo_pp": "FpoPlusPlus",
    "genpo": "GenPO",
}


@pytest.mark.parametrize("method", sorted(ALGORITHMS))
def test_train_and_main_hand_the_loop_this_modules_configuration(method, monkeypatch):
    """`train` and `main` are thin: they hand the shared API this module's presets, algorithm, args and help."""
    from trainers._core import api, cli

    module = importlib.import_module(f"trainers.{method}")
    algo = getattr(module, ALGORITHMS[method])
    calls = []
    monkeypatch.setattr(api, "train", lambda presets, make, env, preset, overrides: calls.append(
        ("train", presets, make(module.cpu_preset("Hopper-v5")).algorithm, env, preset, overrides)))  # fmt: skip
    monkeypatch.setattr(cli, "train_main", lambda *a: calls.append(("cli", *a[:2], a[3], a[4])))
    monkeypatch.setattr(
        cli, "loop_trainer", lambda algorithm, args: types.SimpleNamespace(algorithm=algorithm)
    )
    module.train("Hopper-v5", total_steps=5)
    module.train("Hopper-v5", preset="gym")
    module.main(["--seed", "3"])
    assert calls == [
        ("train", module.PRESETS, algo(module.cpu_preset("Hopper-v5").algo), "Hopper-v5", "cpu", {"total_steps": 5}),
        ("train", module.PRESETS, algo(module.cpu_preset("Hopper-v5").algo), "Hopper-v5", "gym", {}),
        ("cli", module.Args, module.PRESETS, module.__doc__, ["--seed", "3"]),
    ]  # fmt: skip
    assert module.train.__module__ == module.main.__module__ == module.__name__
    assert algo.name == method and set(module.PRESETS) == {"cpu", "playground", "gym"}
