"""The paper's toy analysis (`python -m trainers.lab.toy`): GSB-MDPO tilts a four-mode flow policy in the plane
toward p_old exp(A / beta). Its settings (`tilt_settings`), the problem and the update (`tilt_model`), the sweep's
summary and page (`tilt_summary`) and the command (`tilt_sweep`); what it found is in docs/benchmarks/toy_tilt.md."""
