"""worker/devices.py: the GPUs candidates may be pinned to, and the CPUs a reduction may
use, found without initialising CUDA."""

from __future__ import annotations

import textwrap

import pytest

from shrinkgpu.worker import devices
from shrinkgpu.worker.devices import parse_gpus, parse_nvidia_smi_list, usable_cpus, visible_gpus


def test_devices_respect_the_users_own_visibility_variables():
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "2,3"}) == ("2", "3")
    assert visible_gpus({"HIP_VISIBLE_DEVICES": "1"}) == ("1",)
    assert visible_gpus({"ROCR_VISIBLE_DEVICES": "0,1"}) == ("0", "1")
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": ""}) == ()


def test_mig_instances_are_pinned_by_uuid_and_whole_gpus_by_index():
    listing = textwrap.dedent(
        """\
        GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-5e2f0c7a-1111-2222-3333-444455556666)
          MIG 3g.40gb     Device  0: (UUID: MIG-a1b2c3d4-0000-1111-2222-333344445555)
          MIG 3g.40gb     Device  1: (UUID: MIG-b2c3d4e5-0000-1111-2222-333344445555)
        GPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-77c1d2e3-1111-2222-3333-444455556666)
        """
    )
    assert parse_nvidia_smi_list(listing) == (
        "MIG-a1b2c3d4-0000-1111-2222-333344445555", "MIG-b2c3d4e5-0000-1111-2222-333344445555", "1"
    )


def test_rocm_gpus_are_read_from_the_kernel_drivers_topology(tmp_path):
    from shrinkgpu.worker.devices import _rocm_devices

    for node, simd in (("0", 0), ("1", 304), ("2", 304)):  # a CPU node, then two GPUs
        (tmp_path / node).mkdir()
        (tmp_path / node / "properties").write_text(f"cpu_cores_count 0\nsimd_count {simd}\n")
    assert _rocm_devices(tmp_path) == ("0", "1")


def test_a_hidden_device_is_no_device_and_the_first_variable_set_wins():
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "-1"}) == ()
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": " 0, 2 ", "HIP_VISIBLE_DEVICES": "5"}) == ("0", "2")


def test_without_a_variable_the_ids_are_nvidia_smis(tmp_path):
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H100 (UUID: GPU-1)'\necho 'GPU 1: NVIDIA H100 (UUID: GPU-2)'\n")
    smi.chmod(0o755)
    assert visible_gpus({}, nvidia_smi=str(smi)) == ("0", "1")
    failing = tmp_path / "broken-smi"
    failing.write_text("#!/bin/sh\nexit 9\n")
    failing.chmod(0o755)
    assert devices._nvidia_devices(str(failing)) == ()


def test_gpus_given_on_the_command_line_are_ids_separated_by_commas():
    assert parse_gpus("0, 1,,3") == ("0", "1", "3")
    assert parse_gpus("all") is None and parse_gpus(" ALL ") is None  # every GPU found, as by default
    with pytest.raises(ValueError, match="at least one device id"):
        parse_gpus(" , ")


def test_usable_cpus_are_the_affinity_mask_cut_to_the_cgroup_quota(monkeypatch):
    monkeypatch.setattr(devices.os, "sched_getaffinity", lambda pid: set(range(64)))
    monkeypatch.setattr(devices, "_cgroup_quota", lambda: 3.5)
    assert usable_cpus() == 4  # a quota of 3.5 CPUs' time rounds up
    monkeypatch.setattr(devices, "_cgroup_quota", lambda: 0.2)
    assert usable_cpus() == 1
    monkeypatch.setattr(devices, "_cgroup_quota", lambda: None)
    assert usable_cpus() == 64
