"""Model cards and Hub publishing for gsbpolicy runs.

- `python -m hub_cards.publish RUN_DIR --repo-id ORG/NAME`: a finished run -> a Hub model repo (weights,
  config, results, card, learning curve, optional ONNX export and replay video) in one commit.
- `python -m hub_cards.render [--check]`: (re)generate the committed example cards under
  hub_cards/examples/, or check that they match their result files.
- hub_cards/results/: committed benchmark summaries (written by `python -m trainers.benchmark.aggregate`),
  read by the cards for their baseline rows; their algorithm labels come from `trainers.registry`.
"""
