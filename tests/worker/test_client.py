"""client.py with a real supervisor (no torch: it starts in a fraction of a second): the
supervisor started in a session of its own, preloading answered by field, a lost
supervisor an infrastructure failure, and close ending it."""

from __future__ import annotations

import os
import signal

import psutil
import pytest

from shrinkgpu.worker.client import SupervisorClient, SupervisorGone
from shrinkgpu.worker.protocol import Preloaded


@pytest.fixture
def client():
    made = SupervisorClient()
    made.start()
    yield made
    made.close()


def test_the_supervisor_runs_in_a_session_of_its_own_and_preloads_what_it_can(client):
    assert client.alive and client.pid is not None
    assert os.getsid(client.pid) == client.pid != os.getsid(0)  # Ctrl-C at the terminal reaches the reducer only
    done = client.preload(["colorsys", "no_such_module_of_shrinkgpu"])
    assert isinstance(done, Preloaded) and done.failed == ["no_such_module_of_shrinkgpu"]


def test_a_supervisor_that_died_fails_what_is_asked_of_it_with_supervisor_gone(client):
    os.kill(client.pid, signal.SIGKILL)
    with pytest.raises(SupervisorGone, match="the supervisor process exited"):
        client.preload(["json"], timeout=10)
    assert not client.alive


def test_close_ends_the_supervisor():
    client = SupervisorClient()
    client.start()
    pid = client.pid
    client.close()
    assert not client.alive and not psutil.pid_exists(pid)  # ended and reaped
    with pytest.raises(SupervisorGone, match="not running"):
        client.preload(["json"])
