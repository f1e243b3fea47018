"""Tests of shrinkgpu.syntax, one file per module of src/shrinkgpu/syntax/."""
