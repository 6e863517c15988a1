"""Trainers for gsbpolicy flow policies: shared core (`trainers._core`) and one module per algorithm."""
