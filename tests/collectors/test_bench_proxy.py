"""bench/proxy.py's CPU accounting: a proxy's cost is its whole process tree (LiteLLM's proxy may
serve from worker processes), so work done in a child must count, and only once."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from bench.proxy import litellm_config, litellm_env, tree_cpu_ms

# The parent starts a child that burns 0.4 s of CPU, start-up included (by its own clock, so a busy
# machine only makes it slower), says so, and sleeps; the parent itself only waits.
PARENT = """
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", sys.argv[1]])
child.wait()
"""
CHILD = """
import sys, time
while time.process_time() < 0.4:
    pass
print("burnt", flush=True)
time.sleep(60)
"""


def test_tree_cpu_counts_the_childs_work_once() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT, CHILD], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None and parent.stdout.readline() == "burnt\n"
        time.sleep(0.05)
        whole, own = tree_cpu_ms(parent.pid), tree_cpu_ms_alone(parent.pid)

        assert own < 300  # the parent's own start-up, no more
        assert 350 <= whole - own < 800  # the child's 0.4 s (in 10 ms ticks), counted once
    finally:
        parent.kill()
        parent.wait()


def test_a_process_gone_counts_nothing() -> None:
    assert tree_cpu_ms(2**22 + 1) == 0  # above Linux's largest pid: never there


def test_the_peer_is_kept_on_loopback_without_a_database() -> None:
    env = litellm_env({"DATABASE_URL": "postgresql://x/y", "PATH": "/bin"})

    assert "DATABASE_URL" not in env and env["PATH"] == "/bin"
    assert env["LITELLM_TELEMETRY"] == "False" and env["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    assert '"api_base": "http://127.0.0.1:5/v1"' in litellm_config("http://127.0.0.1:5")


def tree_cpu_ms_alone(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")
