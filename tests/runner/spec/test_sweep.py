"""The saturation sweep of a spec's workload entry (runner.spec.workloads): a list in
``params.clients`` or ``sweep:`` expands into one cell family per client count."""
from __future__ import annotations

import pytest

from runner.spec.model import SpecError, count_cells, expand, parse_spec


def _spec(**entry) -> dict:
    return {"servers": [{"name": "pyftpdlib"}, {"name": "tpd"}], "repeats": 2,
            "workloads": [{"name": "retr_sustained", **entry}, {"name": "login"}]}


def test_clients_list_expands_one_cell_family_per_count() -> None:
    spec = parse_spec(_spec(params={"clients": [8, 1, 2, 4], "duration": 1}))
    assert spec.workloads[0].sweep == [1, 2, 4, 8]
    cells = expand(spec)
    assert len(cells) == count_cells(spec) == 2 * 2 * (4 + 1)
    sweep = [c for c in cells if c.workload == "retr_sustained"]
    assert [c.params.clients for c in sweep if c.repeat == 0 and c.server.name == "tpd"] == [1, 2, 4, 8]
    assert all(c.params.duration == 1 for c in sweep)
    keys = {c.params.clients: c.params_key for c in sweep}
    assert len(keys) == 4  # one cell family per count, differing only in clients
    assert len({k.replace(f"clients={n},", "") for n, k in keys.items()}) == 1
    # the stored spec round-trips with the sweep
    again = parse_spec(spec.model_dump())
    assert [c.params_key for c in expand(again)] == [c.params_key for c in cells]


def test_sweep_block_is_the_same() -> None:
    a = expand(parse_spec(_spec(params={"clients": [1, 2]})))
    b = expand(parse_spec(_spec(sweep=[2, 1])))
    assert [(c.workload, c.params_key) for c in a] == [(c.workload, c.params_key) for c in b]


@pytest.mark.parametrize("entry, message", [
    ({"params": {"clients": []}}, "at least one client count"),
    ({"params": {"clients": [1, 1]}}, "repeated"),
    ({"params": {"clients": [0, 4]}}, "outside 1..20000"),
    ({"params": {"clients": list(range(1, 100))}}, "at most 64"),
    ({"params": {"clients": [1, 2]}, "sweep": [4]}, "not both"),
])
def test_bad_sweeps_are_refused(entry, message) -> None:
    with pytest.raises(SpecError, match=message) as e:
        parse_spec(_spec(**entry))
    assert "workloads.0" in str(e.value)


def test_sustained_params_are_validated() -> None:
    with pytest.raises(SpecError, match="session"):
        parse_spec(_spec(params={"session": "pooled"}))
    with pytest.raises(SpecError, match="rate"):
        parse_spec(_spec(params={"rate": 0}))
    spec = parse_spec(_spec(params={"rate": 50, "user_rate": "100K", "session": "reuse"}))
    assert spec.workloads[0].params.user_rate == 100 * 1024


def test_command_line_clients_replace_a_sweep(tmp_path) -> None:
    """``xferlab run spec.yaml --clients 8``: one count instead of the spec's sweep, spelled
    either way; without --clients the sweep stays."""
    import json

    from runner.cli import parse_args
    from runner.cli.campaign import _build_spec

    for entry in ({"params": {"clients": [1, 2, 4]}}, {"sweep": [1, 2, 4]}):
        path = tmp_path / "spec.json"
        path.write_text(json.dumps(_spec(**entry)))
        assert _build_spec(parse_args(["run", str(path)])).workloads[0].sweep == [1, 2, 4]
        spec = _build_spec(parse_args(["run", str(path), "--clients", "8"]))
        assert spec.workloads[0].sweep is None and spec.workloads[0].params.clients == 8
