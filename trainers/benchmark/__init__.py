"""The benchmark pipeline: suites as data (`suites`), the runner (`runner`, `python -m trainers.benchmark`),
the summaries, tables, plots and claims generated from the run ledgers (`aggregate`, `stats`, `claims`;
`python -m trainers.benchmark.aggregate`). Its outputs are files in hub_cards/results/, which the model
cards read; hub_cards never imports this package.
"""
