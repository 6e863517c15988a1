"""The benchmark pipeline: suites as data (`suites`), the runner (`runner`, `python -m trainers.benchmark`),
the summaries, tables and plots generated from the run ledgers (`aggregate`, `stats`;
`python -m trainers.benchmark.aggregate`), pre-registered claims and their verdicts (`preregistration`,
`confirmatory`). Its outputs are files in hub_cards/results/, which the model cards read; hub_cards never
imports this package. The paper's claims and their page are the lab's (`trainers.lab.claims`).
"""
