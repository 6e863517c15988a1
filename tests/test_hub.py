"""GSBPolicy through the Hub protocol: push, download by repo id, revisions, offline cache."""

import jax
import numpy as np
import pytest
from fake_hub import FakeHub, point_client_at

from gsbpolicy import GSBPolicy, make_policy


@pytest.fixture
def hub(monkeypatch, tmp_path):
    with FakeHub() as server:
        point_client_at(monkeypatch, server.endpoint, cache_dir=tmp_path / "hf-cache")
        yield server


def test_push_then_from_pretrained_by_repo_id_then_offline(hub, monkeypatch, tiny_policy):
    from huggingface_hub import constants

    policy = GSBPolicy(tiny_policy)
    policy.push_to_hub("org/tiny-flow", token="fake-token")
    assert set(hub.files("org/tiny-flow")) == {"config.json", "model.safetensors"}
    obs = np.random.default_rng(0).normal(size=(7, tiny_policy.spec.obs_dim)).astype(np.float32)
    expected, _ = policy.predict(obs)

    downloaded = GSBPolicy.from_pretrained("org/tiny-flow")
    np.testing.assert_array_equal(downloaded.predict(obs)[0], expected)

    hub.stop()
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    offline = GSBPolicy.from_pretrained("org/tiny-flow")
    np.testing.assert_array_equal(offline.predict(obs)[0], expected)
    cached_only = GSBPolicy.from_pretrained("org/tiny-flow", local_files_only=True)
    np.testing.assert_array_equal(cached_only.predict(obs)[0], expected)


def test_revisions_and_missing_repos(hub, tiny_policy):
    from huggingface_hub.errors import LocalEntryNotFoundError, RepositoryNotFoundError, RevisionNotFoundError

    first = GSBPolicy(tiny_policy)
    first.push_to_hub("org/versions")
    first_sha = hub.commits("org/versions")[-1]
    second = GSBPolicy(make_policy(tiny_policy.spec, key=jax.random.key(7)))
    second.push_to_hub("org/versions", commit_message="retrain")
    obs = np.ones(tiny_policy.spec.obs_dim, np.float32)

    np.testing.assert_array_equal(GSBPolicy.from_pretrained("org/versions").act(obs), second.act(obs))
    old = GSBPolicy.from_pretrained("org/versions", revision=first_sha)
    np.testing.assert_array_equal(old.act(obs), first.act(obs))
    with pytest.raises(
        RepositoryNotFoundError, match="^Hub policy 'org/does-not-exist': config.json not found"
    ):
        GSBPolicy.from_pretrained("org/does-not-exist")
    with pytest.raises(RevisionNotFoundError, match=f"^Hub policy 'org/versions' at revision '{'0' * 40}'"):
        GSBPolicy.from_pretrained("org/versions", revision="0" * 40)
    with pytest.raises(
        LocalEntryNotFoundError, match="^Hub policy 'org/never-downloaded': .* offline mode is on"
    ):
        GSBPolicy.from_pretrained("org/never-downloaded", local_files_only=True)


def test_local_paths_never_reach_the_hub(tmp_path):
    with pytest.raises(FileNotFoundError, match="policy folder not found"):
        GSBPolicy.from_pretrained(str(tmp_path / "missing" / "policy"))
    with pytest.raises(FileNotFoundError, match="policy folder not found"):
        GSBPolicy.from_pretrained("./no-such-policy")


def test_extra_files_land_at_their_names_and_links_inside_their_folder_are_followed(
    hub, tmp_path, tiny_policy
):
    card = tmp_path / "run" / "README.md"
    card.parent.mkdir()
    card.write_text("# card")
    (tmp_path / "run" / "CARD.md").symlink_to(card)  # a link that stays inside its own folder is fine
    extra = {"README.md": tmp_path / "run" / "CARD.md", "media/notes.txt": card}
    GSBPolicy(tiny_policy).push_to_hub("org/with-extras", extra_files=extra)
    files = hub.files("org/with-extras")
    assert set(files) == {"config.json", "model.safetensors", "README.md", "media/notes.txt"}
    assert files["README.md"] == files["media/notes.txt"] == b"# card"
