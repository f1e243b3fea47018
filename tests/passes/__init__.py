"""Tests of shrinkgpu.passes, one file per module of src/shrinkgpu/passes/."""
