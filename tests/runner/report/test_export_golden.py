"""Export bytes are pinned: a fixed campaign is stored in the real PostgreSQL (through
the store helpers, as a run stores it), read back with ``runner.report.reader.load_campaign``
and exported in every format; each export must equal, byte for byte, the golden file.
The ``sweep.*`` goldens hold a saturation sweep (the sweep rows, the saturation tables,
the knee).

Regenerate only for an intended change of the export bytes:
``XFERLAB_REGEN_GOLDEN=1 .venv/bin/python -m pytest tests/runner/report/test_export_golden.py``
rewrites the files that differ and fails, printing the unified diff of each; review it,
run the test again (it passes), and say so in the commit.
"""
from __future__ import annotations

import difflib
import os
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

GOLDEN = Path(__file__).parent / "golden"
FORMATS = ("text", "rst", "html", "md", "csv", "json")

SMALL = {"clients": 10, "file_size": "256K", "transfer_size": "4M", "duration": 0.2, "op_timeout": 20,
         "phase_timeout": 60}

#: workload -> (primary metric, unit, base value of server 0)
PRIMARY = {"stor": ("throughput", "MiB/s", 600.25), "retr": ("throughput", "MiB/s", 1500.5),
           "login": ("elapsed", "s", 0.25), "stor_idle": ("throughput", "MiB/s", 550.0),
           "retr_idle": ("throughput", "MiB/s", 1400.75), "retr_concurrent": ("elapsed", "s", 1.5),
           "stor_concurrent": ("elapsed", "s", 2.25), "quit": ("elapsed", "s", 0.125)}


def _value(base: float, server: int, repeat: int, seq: int) -> float:
    """A fixed, server-dependent value with some spread across repeats."""
    return round(base * (1.0 + 0.15 * server) * (1.0 + 0.01 * ((seq * 7 + repeat * 3) % 5)), 6)


def store_fixed_campaign(engine) -> int:
    """Store the fixed campaign: 3 servers, the classic suite plus retr_concurrent with
    20 clients (a second parameter set), 3 repeats; a failed and a skipped cell; memory
    (tree and cgroup), latency, fairness, client CPU and error samples. Returns its id."""
    from runner.spec.model import parse_spec
    from runner.store import campaigns as crud
    from runner.store.models import Cell, Sample

    spec = parse_spec({
        "name": "golden exports", "repeats": 3, "backend": "local",
        "servers": [{"name": "pyftpdlib", "version": "2.2.0"},
                    {"name": "pyftpdlib", "version": "1.5.10", "variant": {"use_sendfile": False}},
                    {"name": "vsftpd", "label": "vsftpd 3.0.3"}],
        "workloads": [{"preset": "classic", "params": SMALL},
                      {"name": "retr_concurrent", "params": {**SMALL, "clients": 20}}]})
    with Session(engine, expire_on_commit=False) as s:
        camp = crud.create_campaign(s, spec=spec, backend="local")
        s.commit()
        env = crud.get_or_create_environment(
            s, data={"kernel": "6.1.0-test", "cores": 2, "cpu": "Test CPU @ 2.0GHz", "backend": "local"},
            env_class="golden-env")
        build = crud.get_or_create_build(s, info={"name": "pyftpdlib", "version": "2.2.0", "variant": {}})
        cells = list(s.query(Cell).filter(Cell.campaign_id == camp.id).order_by(Cell.seq))
        labels = list(dict.fromkeys(c.server_label for c in cells))
        for c in cells:
            c.status = "running"
            c.started_at = crud.now()
            idx = labels.index(c.server_label)
            if idx == 2 and c.workload == "stor_concurrent":
                crud.finish_cell(s, cell=c, status="skipped", error="skipped: vsftpd: no such binary here")
                continue
            if idx == 1 and c.workload == "retr" and c.repeat == 1:
                crud.finish_cell(s, cell=c, status="failed",
                                 error="3 failed operations (timeout=3): first timeout: 421 Timeout", build=build,
                                 environment=env)
                continue
            metric, unit, base = PRIMARY[c.workload]
            v = _value(base, idx, c.repeat, c.seq)
            samples = [Sample(metric=metric, stat="value", value=v, unit=unit),
                       Sample(metric="errors", stat="total", value=float((c.seq % 4 == 0) * idx), unit="count"),
                       Sample(metric="client_cpu", stat="utilization",
                              value=round(0.3 + 0.2 * idx + 0.01 * c.repeat, 4), unit="ratio"),
                       Sample(metric="ops_rate", stat="value", value=round(100.0 / (1 + idx) + c.repeat, 3),
                              unit="1/s")]
            if metric == "elapsed":
                samples.append(Sample(metric="throughput", stat="value", value=round(10.0 / v, 6), unit="MiB/s"))
            if c.workload.endswith("concurrent"):
                samples += [Sample(metric="latency", stat="p50", value=round(v * 100, 3), unit="ms"),
                            Sample(metric="latency", stat="p99", value=round(v * 180, 3), unit="ms"),
                            Sample(metric="fairness", stat="jain", value=round(0.99 - 0.05 * idx, 4),
                                   unit="ratio")]
            for stat, mem in (("start", 5_000_000), ("peak", 9_000_000 + idx * 1_500_000), ("end", 8_000_000)):
                samples.append(Sample(metric="server_mem_uss", stat=stat, value=float(mem + 4096 * c.repeat),
                                      unit="bytes"))
                samples.append(Sample(metric="server_mem_rss_minus_shared", stat=stat,
                                      value=float(mem * 1.1 + 8192 * idx), unit="bytes"))
            if idx == 2:
                samples.append(Sample(metric="server_cgroup_mem", stat="peak", value=float(20_000_000 + c.seq),
                                      unit="bytes"))
            crud.finish_cell(s, cell=c, status="done", samples=samples, build=build, environment=env)
        return camp.id


#: server index -> N -> (throughput MiB/s, p99 ms, users at rate R): server 0 saturates at
#: N=4 (its p99 doubles at 8); server 1 still rises at the end of the sweep.
SWEEP = {0: {1: (100.0, 2.0, 1), 2: (190.0, 2.2, 2), 4: (380.0, 3.1, 4), 8: (385.0, 4.4, 6)},
         1: {1: (80.0, 1.0, 0), 2: (160.0, 1.1, 1), 4: (300.0, 1.2, 3), 8: (590.0, 1.5, 8)}}


def store_sweep_campaign(engine) -> int:
    """Store a saturation sweep: ``retr_sustained`` at 1, 2, 4, 8 clients on two
    servers, 2 repeats, with the figures of :data:`SWEEP` (the second repeat 1% higher).
    Returns its id."""
    from runner.spec.model import parse_spec
    from runner.store import campaigns as crud
    from runner.store.models import Cell, Sample

    spec = parse_spec({
        "name": "golden sweep", "repeats": 2, "backend": "local",
        "servers": [{"name": "tpd"}, {"name": "pyftpdlib", "version": "2.2.0"}],
        "workloads": [{"name": "retr_sustained", "params": {"clients": [1, 2, 4, 8], "duration": 2, "file_size": "1M",
                                                            "user_rate": "4M"}}]})
    with Session(engine, expire_on_commit=False) as s:
        camp = crud.create_campaign(s, spec=spec, backend="local")
        s.commit()
        env = crud.get_or_create_environment(s, data={"kernel": "6.1.0-test", "cores": 2, "backend": "local"},
                                             env_class="golden-env")
        cells = list(s.query(Cell).filter(Cell.campaign_id == camp.id).order_by(Cell.seq))
        labels = list(dict.fromkeys(c.server_label for c in cells))
        for c in cells:
            c.status = "running"
            c.started_at = crud.now()
            tp, p99, users = SWEEP[labels.index(c.server_label)][c.params["clients"]]
            k = 1.0 + 0.01 * c.repeat
            samples = [Sample(metric="throughput", stat="value", value=round(tp * k, 6), unit="MiB/s"),
                       Sample(metric="ops_rate", stat="value", value=round(tp * k, 6), unit="1/s"),
                       Sample(metric="latency", stat="p50", value=round(p99 / 2, 6), unit="ms"),
                       Sample(metric="latency", stat="p99", value=round(p99 * k, 6), unit="ms"),
                       Sample(metric="service_time", stat="p99", value=round(p99 * k / 2, 6), unit="ms"),
                       Sample(metric="users_at_rate", stat="value", value=float(users), unit="count"),
                       Sample(metric="errors", stat="total", value=0.0, unit="count")]
            crud.finish_cell(s, cell=c, status="done", samples=samples, environment=env)
        return camp.id


def exports(engine) -> dict[str, str]:
    """file name -> export text, for the campaign report and a comparison, every format."""
    from runner.report.reader import load_campaign
    from runner.report.render import campaign_report, compare_report

    cid = store_fixed_campaign(engine)
    out: dict[str, str] = {}
    with Session(engine) as s:
        data = load_campaign(s, campaign_id=cid)
        for fmt in FORMATS:
            out[f"campaign.{fmt}"] = campaign_report(data, fmt=fmt)
        out["campaign-speedup.rst"] = campaign_report(data, fmt="rst", speedup=True)
        for fmt in FORMATS:
            out[f"compare.{fmt}"] = compare_report(s, f"{cid}:pyftpdlib 2.2.0", f"{cid}:vsftpd 3.0.3", fmt=fmt)
        sweep = load_campaign(s, campaign_id=store_sweep_campaign(engine))
        for fmt in FORMATS:
            out[f"sweep.{fmt}"] = campaign_report(sweep, fmt=fmt)
    return out


@pytest.fixture(autouse=True)
def chartjs_stand_in(tmp_path, monkeypatch):
    """The HTML goldens inline this stand-in for Chart.js (XFERLAB_CHARTJS_PATH): the bytes
    of Debian's build are the package's, not the export's."""
    stub = tmp_path / "chart.min.js"
    stub.write_text("/* Chart.js stand-in of the golden exports */\n")
    monkeypatch.setenv("XFERLAB_CHARTJS_PATH", str(stub))


def _diff(name: str, want: bytes, got: bytes, most: int = 200) -> str:
    """The unified diff (difflib, 2 lines of context) of golden file ``name`` against the
    export, at most ``most`` lines."""
    lines = list(difflib.unified_diff(want.decode(errors="replace").splitlines(),
                                      got.decode(errors="replace").splitlines(),
                                      f"golden/{name}", f"export {name}", n=2, lineterm=""))
    return "\n".join(lines[:most] + ([f"... {len(lines) - most} more lines"] if len(lines) > most else []))


def test_exports_match_golden_files(engine):
    """Every export equals its golden file. With ``XFERLAB_REGEN_GOLDEN=1`` the files that
    differ are rewritten, and the test still fails, showing what changed."""
    got = {name: body.encode() for name, body in exports(engine).items()}
    names = sorted(p.name for p in GOLDEN.iterdir()) if GOLDEN.is_dir() else []
    diffs = [_diff(name, (GOLDEN / name).read_bytes() if name in names else b"", body)
             for name, body in got.items() if name not in names or (GOLDEN / name).read_bytes() != body]
    extra = sorted(set(names) - set(got))
    if os.environ.get("XFERLAB_REGEN_GOLDEN") == "1" and (diffs or extra):
        GOLDEN.mkdir(exist_ok=True)
        for name, body in got.items():
            (GOLDEN / name).write_bytes(body)
        for name in extra:
            (GOLDEN / name).unlink()
        pytest.fail("golden files regenerated; review the change and say so in the commit:\n"
                    + "\n".join(diffs) + "".join(f"\nremoved golden/{n}" for n in extra), pytrace=False)
    assert not extra, f"golden files with no export: {extra}"
    assert not diffs, "exports differ from their golden files:\n" + "\n".join(diffs)


def test_row_of_a_workload_whose_every_cell_failed_has_its_title(engine):
    """The row title comes from the stored cells' parameters (CampaignData.workloads),
    not the catalogue's raw template ``{clients} concurrent clients (STOR {size} file)``."""
    from runner.report.reader import load_campaign
    from runner.report.tables import campaign_table
    from runner.spec.model import parse_spec
    from runner.store import campaigns as crud
    from runner.store.models import Cell

    spec = parse_spec({"name": "all failed", "repeats": 1, "backend": "local",
                       "servers": [{"name": "pyftpdlib", "version": "2.2.0"}],
                       "workloads": [{"name": "stor_concurrent", "params": SMALL}]})
    with Session(engine, expire_on_commit=False) as s:
        camp = crud.create_campaign(s, spec=spec, backend="local")
        s.commit()
        for c in s.query(Cell).filter(Cell.campaign_id == camp.id):
            crud.finish_cell(s, cell=c, status="failed", error="refused")
        data = load_campaign(s, campaign_id=camp.id)
    table = campaign_table(data)
    assert [r.cells[1].text for r in table.rows] == ["10 concurrent clients (STOR 256K file)"]
    assert table.records[0]["failed"] == 1
