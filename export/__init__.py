"""ONNX export of trained flow policies and a numpy + onnxruntime runtime for robots.

- `export.onnx`: trace the real `FlowPolicy` with jax2onnx, verify it against JAX, write `policy.onnx`
  (`python -m export.onnx POLICY --out FILE.onnx`).
- `export.runtime`: `OnnxPolicy`, the JAX-free runtime (imports only numpy and onnxruntime).
- `export.latency`: single-observation latency of the ONNX policy against JAX and the network's floor.
- `export.contract`: the robot contract written into the file's metadata (names, units, bounds, control period,
  sampler, provenance); `python -m export.inspect FILE.onnx` prints it.
- `export.steps_table`: return, action difference and latency of exports with fewer generation steps
  (`export.onnx --steps K`), the table of docs/robot.md.

This file imports nothing, so `from export.runtime import OnnxPolicy` works on a machine without JAX.
"""

ONNX_MODULES = ("jax2onnx", "onnx", "onnxruntime")
"""What the `onnx` extra installs: the exporter needs all three, the runtime only onnxruntime."""
