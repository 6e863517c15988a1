import pytest

from gsbpolicy._envid import env_kind


@pytest.mark.parametrize(
    "env_id, kind",
    [
        ("Hopper-v5", "gymnasium"),
        ("InvertedPendulum-v5", "gymnasium"),
        ("my_pkg.envs:Reach-v0", "gymnasium"),
        ("ALE/Pong-v5", "gymnasium"),
        ("CartpoleSwingup", "playground"),
        ("FingerSpin", "playground"),
        ("Foo-v", "playground"),
        ("half-v5x", "playground"),
    ],
)
def test_env_kind_reads_the_id_form(env_id, kind):
    assert env_kind(env_id) == kind
