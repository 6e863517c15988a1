"""The own-env page's tables of the default search and its follow-up are its committed log's, generated."""

from trainers.lab import default_search


def test_the_search_table_on_the_page_is_generated_from_the_log():
    page = default_search.PAGE.read_text()
    assert default_search.with_table(page, default_search.table()) == page
    assert "**the default**" in default_search.table()
    follow_up = default_search.FOLLOW_UP_BLOCK
    assert default_search.with_table(page, default_search.follow_up_table(), follow_up) == page


def test_every_setting_of_the_cpu_preset_that_is_not_the_papers_is_labelled_where_it_is_presented():
    """The `cpu` preset is the default the README's quickstart trains: every field where it differs from both of
    the paper's GSB-MDPO presets is named in its docstring, the README and this page."""
    import dataclasses
    from pathlib import Path

    from trainers import gsb_mdpo
    from trainers.benchmark.suites import SUITES

    labels = {"num_envs": "small geometry", "unroll_length": "small geometry", "num_minibatches": "small geometry",
              "epochs": "small geometry", "normalize_rewards": "reward normalisation",
              "noise_hold": "noise hold", "noise_hold_steps": "noise hold", "max_grad_norm": "gradient clip",
              "value_coef": "value-loss weight", "width": "networks", "depth": "networks"}  # fmt: skip
    presets = [gsb_mdpo.cpu_preset(None), gsb_mdpo.playground_preset(None), gsb_mdpo.gym_preset(None)]
    differing = {
        f.name
        for group in ("rollout", "optim", "algo", "critic", "policy")
        for f in dataclasses.fields(getattr(presets[0], group))
        if getattr(getattr(presets[0], group), f.name)
        not in [getattr(getattr(p, group), f.name) for p in presets[1:]]
    }
    assert differing == set(labels)
    root = Path(__file__).parents[2]
    for text in (
        " ".join(gsb_mdpo.cpu_preset.__doc__.split("Not the paper's", 1)[1].split()),
        " ".join((root / "README.md").read_text().split()),
        " ".join((root / "docs" / "own-env.md").read_text().split()),
        SUITES["small-envs"].description,  # the suite that presents the preset as GSB-MDPO
    ):
        assert all(label in text for label in labels.values())
