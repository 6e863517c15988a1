"""The toy analysis says what it is doing, in order, before each slow step: pretraining, each mirror-descent
iteration, the evaluation (as the framework's long commands do: tests/test_progress.py)."""

import pytest

from tests.test_progress import assert_in_order
from trainers.lab.toy import tilt_sweep


@pytest.mark.slow
def test_toy_tilt_prints_each_phase_and_iteration(capsys):
    # The smallest configuration that still runs every phase (seconds, not minutes; its numbers mean nothing).
    tilt_sweep.main(["--pretrain-steps", "20", "--width", "8", "--depth", "1", "--iterations", "2",
                   "--updates-per-iteration", "2", "--paths-per-iteration", "256", "--minibatch", "128",
                   "--eval-samples", "1000", "--out", "None", "--cache-dir", "None"])  # fmt: skip
    out = capsys.readouterr().out
    assert_in_order(out, "s] pretraining the old policy: step 20/20",
                    "s] mirror descent: 2 iterations of 2 updates on 256 paths each ...", "s] iteration 1/2: masses",
                    "s] iteration 2/2: masses", "s] evaluated on 1000 samples", "quadrant-mass L1 error")  # fmt: skip
