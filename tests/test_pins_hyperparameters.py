"""Pins of GSB-MDPO's presets, field by field: the paper's Table 1 (Playground) and Table 2 (Gymnasium)
GSB-MDPO columns, and where a table is silent, our stated choice (marked "ours"). The shared rollout setups
(`trainers.presets.playground` / `gym`) are pinned by test_trainer's table test; this file pins what
`trainers/gsb_mdpo.py` itself sets, so that a mutation of any one constant there fails a test."""

import dataclasses

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
        "max_grad_norm": 1.0,
        "value_coef": 1.0,
    }
    assert fields(args, "algo") == {"kl_coef": 0.08, "ref_mix": 0.02, "step_clip": 0.1, "path_clip": 0.4}


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
        16,
        64,
        4,
        8,
    )
