"""runner.cell.outcome: one construction of a cell's outcome for the local and the multi-host
cell runner; run_campaign picks the runner; the backends' handles answer every
ServerHandle method (exit_reason, cgroup_memory)."""
from __future__ import annotations

from runner.cell.outcome import crashed, measured, memory_figures, skipped
from runner.load.result import ClientFigures, PhaseResult
from runner.load.target import Target
from tests.support.ports import free_port


def _result(errors: dict[str, int], notes: list[str]) -> PhaseResult:
    return PhaseResult("retr_concurrent", 2.0, 4 << 20, 3, [10.0, 20.0, 30.0], errors,
                       [ClientFigures(2 << 20, 1.0), ClientFigures(2 << 20, 2.0, False)], 0.5, 0.1, notes)


def test_memory_figures_skips_missing_and_puts_peak_last():
    m = memory_figures({"start": (100.0, 90.0), "loaded": None, "end": (None, 95.0)}, (150.0, None))
    assert m == {"uss": {"start": 100.0, "peak": 150.0}, "rss_minus_shared": {"start": 90.0, "end": 95.0,
                                                                              "peak": None}}


def test_local_failure_reason_names_first_error_and_dead_server():
    r = _result({"timeout": 2, "refused": 1}, ["login mode: concurrent", "first timeout error: 421 Timeout",
                                              "phase timeout after 60 s: 2 unfinished"])
    out = measured(r, build_info={"name": "vsftpd"}, server_alive=False, exit_reason="exited")
    assert out.status == "failed"
    assert out.error == ("3 failed operations (refused=1, timeout=2): first timeout error: 421 Timeout; "
                         "phase timeout after 60 s: 2 unfinished; server not running at the end of the cell (exited)")
    assert out.build_info == {"name": "vsftpd"}
    metrics = {(s.metric, s.stat) for s in out.samples}
    assert ("elapsed", "value") in metrics and ("fairness", "jain") in metrics


def test_multihost_failure_reason_reads_host_prefixed_notes():
    r = _result({"timeout": 1, "host_failed": 1},
                ["multi-host: load from 2 client hosts: cli1 (3 ops, 4194304 bytes)",
                 "cli1: login mode: concurrent", "cli1: first timeout error: 421 Timeout",
                 "cli1: client hosts without a result: cli2: no route"])
    out = measured(r, build_info=None, server_alive=False, server_where="srv1", summary_suffix=" [1 client hosts]",
                   environment={"backend": "local+multihost"})
    assert out.error == ("2 failed operations (host_failed=1, timeout=1): cli1: first timeout error: 421 Timeout; "
                         "cli1: client hosts without a result: cli2: no route; "
                         "server on srv1 not running at the end of the cell")
    assert out.summary.endswith(" [1 client hosts]") and out.environment == {"backend": "local+multihost"}


def test_done_skipped_and_crashed():
    out = measured(_result({}, []), build_info={}, cgroup_memory={"peak": 5.0})
    assert out.status == "done" and out.error is None
    assert ("server_cgroup_mem", "peak") in {(s.metric, s.stat) for s in out.samples}
    s = skipped("vsftpd: no binary")
    assert (s.status, s.error, s.summary) == ("skipped", "skipped: vsftpd: no binary", "skipped: vsftpd: no binary")
    try:
        raise KeyError("x")
    except KeyError as exc:
        c = crashed(exc, 7)
    assert c.status == "failed" and c.error.startswith("KeyError: 'x'\nTraceback")


def test_run_campaign_picks_the_cell_runner(tmp_path, monkeypatch):
    from runner.campaign.loop import cell_runner, run_local_cell
    from runner.cell.remote import run_remote_cell
    from runner.config import get_settings
    from runner.spec.model import parse_spec

    inv = tmp_path / "inv.yml"  # hosts.inventory must be a static file under an allowed directory
    inv.write_text("all:\n  children:\n    servers: {hosts: {s1: {}}}\n    clients: {hosts: {c1: {}}}\n")
    monkeypatch.setenv("XFERLAB_INVENTORY_DIRS", str(tmp_path))
    get_settings.cache_clear()
    base = {"servers": [{"name": "pyftpdlib"}], "workloads": [{"name": "login"}]}
    assert cell_runner(parse_spec(base)) is run_local_cell
    assert cell_runner(parse_spec({**base, "hosts": {"inventory": str(inv)}})) is run_remote_cell
    get_settings.cache_clear()


def test_handles_answer_exit_reason_and_cgroup_memory():
    from runner.backends.docker import DockerServerHandle
    from runner.backends.local import ExternalHandle, LocalServerHandle

    port = free_port()  # nothing listens there: the external server is "gone"
    h = ExternalHandle(Target("127.0.0.1", port, "u", "p"), None, {})
    assert h.exit_reason() == f"no FTP login at 127.0.0.1:{port}" and h.cgroup_memory() is None
    for cls in (LocalServerHandle, DockerServerHandle):
        assert callable(cls.exit_reason) and callable(cls.cgroup_memory)


def test_stage_clock_records_blocks_and_known_durations():
    import time

    import pytest

    from runner.catalogue.stages import STAGES
    from runner.cell.local import StageClock

    clock = StageClock()
    with clock("start"):
        time.sleep(0.05)
    with clock("start"):   # a stage that runs twice adds up
        time.sleep(0.02)
    clock.record("probe", 0.03)
    with pytest.raises(RuntimeError), clock("phase"):   # timed even when the block raises
        raise RuntimeError("x")
    assert 0.07 <= clock.seconds["start"] < 0.5 and clock.seconds["probe"] == 0.03 and "phase" in clock.seconds
    with pytest.raises(ValueError, match="unknown cell stage 'nap'"):
        clock.record("nap", 1.0)
    rows = {s.stat: s for s in clock.samples()}
    assert set(rows) == {"start", "probe", "phase"} <= set(STAGES)
    assert all(s.metric == "cell_time" and s.unit == "s" for s in rows.values())
