"""How shrinkgpu is measured: the cases, the runner and the recorded figures (evaluation/README.md)."""
