"""Environment snapshot of this machine."""
from __future__ import annotations

import json

from runner.metrics.environment import SYSCTLS, environment_class, snapshot


def test_snapshot_fields():
    s = snapshot({"backend": "local"})
    for key in ("kernel", "cpu_model", "cores", "mem_total", "sysctls", "rlimit_nofile",
                "cpu_governor", "python", "xferlab_version", "hostname", "backend"):
        assert key in s, key
    assert s["cores"] >= 1 and s["mem_total"] > 0
    assert set(s["sysctls"]) == set(SYSCTLS)
    assert s["sysctls"]["net.core.somaxconn"].isdigit()
    assert len(s["sysctls"]["net.ipv4.ip_local_port_range"].split()) == 2
    assert s["rlimit_nofile"]["soft"] <= s["rlimit_nofile"]["hard"] or s["rlimit_nofile"]["hard"] == -1
    assert s["xferlab_version"]
    json.dumps(s)  # storable as JSON


def test_environment_class():
    a = snapshot({"backend": "local"})
    b = snapshot({"backend": "local"})
    c = snapshot({"backend": "docker"})
    assert environment_class(a) == environment_class(b)
    assert len(environment_class(a)) == 12
    assert environment_class(a) != environment_class(c)
    assert environment_class({**a, "hostname": "elsewhere"}) == environment_class(a)
    assert environment_class({**a, "kernel": "0.0"}) != environment_class(a)
