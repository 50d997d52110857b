"""The capacity search's pure parts (runner.metrics.capacity): the judge of one step, the
search against simulated servers whose capacity is known, and the break reason."""
from __future__ import annotations

import pytest

from runner.metrics.capacity import Slo, StepFigures, break_reason, judge, next_step
from runner.spec.capacity import CapacitySpec
from runner.spec.model import parse_spec


def _search(capacity: int, *, start: int = 1, max_users: int = 1024, resolution: int = 1,
            flaky: set[int] = frozenset()) -> tuple[int, list[int], bool]:
    """Run the search against a server that passes N <= capacity (the first run at an N in
    ``flaky`` fails); returns (answer, steps, capped)."""
    runs: dict[int, list[bool]] = {}
    steps = []
    for _ in range(100):
        st = next_step(runs, start=start, max_users=max_users, resolution=resolution)
        if st.next_clients is None:
            return st.answer, steps, st.capped
        n = st.next_clients
        steps.append(n)
        ok = n <= capacity and not (n in flaky and n not in runs)
        runs.setdefault(n, []).append(ok)
    raise AssertionError("search did not end")


@pytest.mark.parametrize("capacity", [0, 1, 2, 3, 5, 7, 8, 100, 511, 512, 513, 1000])
def test_search_finds_the_capacity_exactly(capacity):
    answer, steps, capped = _search(capacity)
    assert answer == capacity and not capped
    # ramp: about log2 steps up, bisection: about log2 steps down, one confirmation
    bound = 2 * (capacity.bit_length() + 1) + 1
    assert len(steps) <= bound, steps


def test_search_resolution_and_cap():
    for cap in (37, 100, 300):
        answer, _, _ = _search(cap, resolution=8)
        assert cap - 8 < answer <= cap  # the true capacity lies in [answer, hi - 1], hi - answer <= 8
    # a failing first step is bisected down to one user whatever the resolution
    assert _search(1, start=8, resolution=8) == (1, [8, 4, 2, 1, 1], False)
    assert _search(0, start=2, resolution=4) == (0, [2, 1], False)
    answer, steps, capped = _search(5000, max_users=64)
    assert (answer, capped) == (64, True) and steps == [1, 2, 4, 8, 16, 32, 64, 64]


def test_failed_confirmation_goes_below():
    answer, steps, _ = _search(12, flaky={12})
    assert answer == 11 and steps[-1] == 11, steps
    assert _search(3, start=6)[0] == 3  # a start above the capacity bisects below it


def test_judge_each_criterion():
    slo = Slo(user_rate=100 * 1024, p99_ms=50, min_jain=0.9)
    good = StepFigures(clients=4, users_at_rate=4, p99_ms=20, jain=0.99)
    assert judge(good, slo).ok
    for bad, word in ((StepFigures(4, users_at_rate=3, p99_ms=20, jain=0.99), "3 of 4 users"),
                      (StepFigures(4, users_at_rate=4, p99_ms=51, jain=0.99), "p99 51 ms > 50 ms"),
                      (StepFigures(4, users_at_rate=4, p99_ms=20, jain=0.8), "Jain 0.800 < 0.9"),
                      (StepFigures(4, users_at_rate=4, p99_ms=20, jain=0.99, errors=2), "2 failed operations"),
                      (StepFigures(4, status="failed"), "cell failed"),
                      (StepFigures(4, users_at_rate=4, jain=0.99), "p99 not measured")):
        v = judge(bad, slo)
        assert not v.ok and any(word in m for m in v.missed), v
    assert judge(StepFigures(1, users_at_rate=1, p99_ms=1), slo).ok  # no Jain's index for one user


def test_break_reason_order():
    base = dict(clients=8, throughput=11.5, server_cpu_s=3.8, elapsed_s=2.0, server_cores=2)
    assert break_reason(StepFigures(**base, client_util=0.95))[0] == "client"
    # a client that ran 35% of the phase and waited 64% on a run queue was runnable 99% of it:
    # starved on its CPU, still the bound (tpd at 384 users on a shared machine)
    kind, text = break_reason(StepFigures(**base, client_util=0.35, client_wait=0.64))
    assert kind == "client" and "runnable 99%" in text and "waited 64%" in text
    assert break_reason(StepFigures(**base, client_util=0.5, client_wait=0.3))[0] == "server_cpu"  # 80%: idle at times
    # ran 45%, waited 42% (87%), and the host took 10% of its CPU's time: 0.45 / 0.9 + 0.42 = 92%
    kind, text = break_reason(StepFigures(**base, client_util=0.45, client_wait=0.42, client_steal=0.10))
    assert kind == "client" and "runnable 92%" in text and "10% of its CPUs' time stolen" in text
    assert break_reason(StepFigures(**base, client_util=0.45, client_wait=0.42))[0] == "server_cpu"
    assert break_reason(StepFigures(**base, listen_drops=3))[0] == "listen_drops"
    assert break_reason(StepFigures(**base, link_rate=12_500_000))[0] == "link"  # 11.5 MiB/s of 100 Mbit
    assert break_reason(StepFigures(**base))[0] == "server_cpu"  # 1.9 of 2 cores busy
    # a mixed phase moved 15.4 MiB/s in all, but 10.1 down and 5.3 up: the full-duplex link
    # (11.9 MiB/s each way) was not the bound; 11.4 down would be
    mixed = {**base, "throughput": 15.36, "server_cpu_s": 0.5}
    assert break_reason(StepFigures(**mixed, link_rate=12_500_000, link_throughput=10.1))[0] == "server"
    kind, text = break_reason(StepFigures(**mixed, link_rate=12_500_000, link_throughput=11.4))
    assert kind == "link" and "11.40 MiB/s moved in its busier direction on a 100 Mbit/s link" in text
    # 16 users asked 16 MiB/s in all, 68% of it downloads: 10.9 MiB/s of the 11.9 one way carries
    kind, text = break_reason(StepFigures(**mixed, link_rate=12_500_000, link_throughput=10.1, demand=16 << 20,
                                          link_demand=0.68 * (16 << 20)))
    assert kind == "link" and "asked 10.88 MiB/s in its busier direction" in text
    assert break_reason(StepFigures(**mixed, link_rate=12_500_000, link_throughput=10.1, demand=16 << 20,
                                    link_demand=0.5 * (16 << 20)))[0] == "server"
    # 9.3 MiB/s moved, but 12 users asked 12 MiB/s of a link that carries 11.9
    kind, text = break_reason(StepFigures(**{**base, "throughput": 9.3}, link_rate=12_500_000, demand=12 << 20))
    assert kind == "link" and "asked 12.00 MiB/s" in text
    assert break_reason(StepFigures(**{**base, "throughput": 9.3}, link_rate=12_500_000, demand=8 << 20))[0] \
        == "server_cpu"
    kind, text = break_reason(StepFigures(**{**base, "server_cpu_s": 0.5}))
    assert kind == "server" and "0.25 of 2 cores" in text
    kind, text = break_reason(StepFigures(**{**base, "server_cpu_s": 0.5}, cpu_pressure=0.97))
    assert kind == "server" and "0.25 of 2 cores" in text and "waiting for a CPU 97% of the phase" in text


def test_spec_capacity_validation():
    ok = {"name": "c", "servers": [{"name": "tpd"}],
          "workloads": [{"name": "retr_sustained", "params": {"file_size": "64K", "duration": 2},
                         "capacity": {"user_rate": "128K"}}]}
    spec = parse_spec(ok)
    [p] = spec.workloads[0].param_sets()
    assert (p.clients, p.rate, p.user_rate) == (1, 2.0, 128 * 1024)  # 1 user x 128 KiB/s / 64 KiB
    cases = (({"name": "retr", "capacity": {"user_rate": "128K"}}, "open loop and per-user rates"),
             ({"name": "login", "capacity": {"user_rate": "128K"}}, "retr_sustained, stor_sustained, mixed"),
             # the default mix moves 0.525 MiB per operation: 3 s x 128 KiB/s is 0.714 of one
             ({"name": "mixed", "capacity": {"user_rate": "128K"}}, "0.714 operations per step"),
             ({"name": "retr_sustained", "params": {"file_size": "1M", "duration": 2},
               "capacity": {"user_rate": "128K"}}, "0.25 operations per step"),
             ({"name": "retr_sustained", "params": {"file_size": "64K", "duration": 2},
               "capacity": {"user_rate": "128K", "check_rate": False}}, "give a service level"),
             ({"name": "retr_sustained", "params": {"file_size": "64K", "duration": 2},
               "capacity": {"user_rate": "128K", "start": 9, "max_users": 8}}, "capacity.start"),
             ({"name": "retr_sustained", "params": {"file_size": "64K", "duration": 2, "clients": [1, 2]},
               "capacity": {"user_rate": "128K"}}, "give no sweep"))
    for entry, word in cases:
        with pytest.raises(ValueError, match=word):
            parse_spec({**ok, "workloads": [entry]})
    assert CapacitySpec(user_rate=2048).p99_ms is None
