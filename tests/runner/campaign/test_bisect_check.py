"""``xferlab bisect`` and ``xferlab check`` end to end on a real server built from source: a git
repository made here from pyftpdlib 2.2.0's source distribution, with harmless commits
around one that makes every RETR wait 50 ms (``time.sleep(0.05)`` in ``ftp_RETR``).

The reference for the figures: tests.support.bisect_repo.
"""
from __future__ import annotations

import json

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from tests.support.bisect_repo import make_repo

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> dict[str, object]:
    """The repository of tests.support.bisect_repo: (commit name -> SHA, path)."""
    return make_repo(tmp_path_factory.mktemp("pyftpdlib-src"))


def _cli(argv: list[str], capsys) -> tuple[int, str]:
    from runner.cli import main

    code = main(argv)
    return code, capsys.readouterr().out


def _campaigns(engine, prefix: str) -> list[tuple[int, str, str]]:
    from runner.store.models import Campaign

    with Session(engine) as s:
        return [tuple(r) for r in s.execute(select(Campaign.id, Campaign.name, Campaign.status)
                                            .where(Campaign.name.like(f"{prefix}%")).order_by(Campaign.id))]


def _elapsed(engine, cid: int) -> list[float]:
    from runner.store.models import Cell, Sample

    with Session(engine) as s:
        return sorted(s.scalars(select(Sample.value).join(Cell, Sample.cell_id == Cell.id).where(
            Cell.campaign_id == cid, Sample.metric == "elapsed", Sample.stat == "value")))


def test_bisect_names_the_slow_commit(repo, xferlab_env, engine, capsys, tmp_path):
    shas = repo["shas"]
    code, out = _cli(["bisect", "--server", "pyftpdlib", "--source", str(repo["path"]), "--good", shas["base"][:10],
                      "--bad", "main", "--workload", "retr_concurrent", "--param", "clients=4", "--param",
                      "file_size=64K", "--metric", "elapsed", "--repeats", "4", "--backend", "local",
                      "--no-warmup", "--json", str(tmp_path / "bisect.json")], capsys)
    print(out)
    assert code == 0, out
    assert f"first bad commit: {shas['slow']} RETR: wait 50 ms (confirmed)" in out
    assert "commits left" in out and "to go)" in out  # progress names the steps left
    doc = json.loads((tmp_path / "bisect.json").read_text())
    assert doc["first_bad"] == shas["slow"] and doc["confirmed"] is True and doc["version"] == 1
    assert [st["role"] for st in doc["steps"]][:2] == ["good", "bad"] and doc["steps"][-1]["verdict"] == "bad"
    order = [shas[k] for k in ("base", "readme", "comment", "slow", "history", "tip")]  # as make_repo made them
    assert doc["commits"] == order
    # the summary: every step, in the repository's order (its place, good end 1), a confirmation after its step
    summary = out.split("steps, in the repository's order (6 commits, good end first):\n", 1)[1]
    rows = [line.split() for line in summary.split("first bad commit:", 1)[0].splitlines() if line.strip()]
    assert len(rows) == len(doc["steps"]), rows
    places = [int(r[1]) for r in rows]
    assert places == sorted(places) and [r[2] for r in rows] == [order[p - 1][:12] for p in places], rows
    assert [r[3] for r in rows if r[2] == shas["slow"][:12]][-1] == "confirm"
    runs = _campaigns(engine, "bisect pyftpdlib")
    # good, bad, at least 2 midpoints of the 5 commits, then the found commit and its parent again
    assert 6 <= len(runs) <= 10, runs
    assert all(status == "done" for _i, _n, status in runs), runs
    by_commit: dict[str, list[int]] = {}
    for cid, name, _status in runs:
        by_commit.setdefault(name.split()[2], []).append(cid)
    assert len(by_commit[shas["slow"][:12]]) >= 2 and len(by_commit[shas["comment"][:12]]) >= 1
    for sha_name, slow in (("base", False), ("tip", True), ("slow", True), ("comment", False)):
        for cid in by_commit.get(shas[sha_name][:12], []):
            xs = _elapsed(engine, cid)
            assert len(xs) == 4
            med = (xs[1] + xs[2]) / 2
            if slow:
                assert 0.2 <= med < 1.5, (sha_name, xs)
            else:
                assert 0.0005 < med < 0.1, (sha_name, xs)


def test_check_gates_the_slow_ref_and_passes_a_harmless_one(repo, xferlab_env, engine, capsys, tmp_path):
    from runner.store.models import Cell, ServerBuild

    shas = repo["shas"]
    spec = tmp_path / "gate.yaml"
    spec.write_text(f"name: retr gate\nrepeats: 4\nwarmup: false\nbackend: local\n"
                    f"servers:\n  - {{name: pyftpdlib, source: {repo['path']}, ref: main}}\n"
                    "workloads:\n  - {name: retr_concurrent, params: {clients: 4, file_size: 64K}}\n")
    md, xml = tmp_path / "slow.md", tmp_path / "slow.xml"
    code, out = _cli(["check", str(spec), "--candidate", shas["slow"][:10], "--baseline", shas["comment"][:10],
                      "--min-effect", "100%", "--markdown", str(md), "--junit", str(xml)], capsys)
    print(out)
    assert code == 1, out
    text = md.read_text()
    assert text.startswith("## :x: xferlab check: regression")
    assert "| 4 concurrent clients (RETR 64K file) elapsed |" in text and "**regression**" in text
    assert 'failures="1"' in xml.read_text() and "<failure message=\"regression: +" in xml.read_text()
    base_id, cand_id = [cid for cid, _n, _s in _campaigns(engine, "check ")][-2:]
    base, cand = _elapsed(engine, base_id), _elapsed(engine, cand_id)
    assert 0.2 <= cand[1] and cand[-1] < 1.5, cand
    assert 0.0005 < base[1] and base[2] < 0.1, base

    # the harmless ref against the stored baseline campaign (its samples are reused)
    md2 = tmp_path / "ok.md"
    code, out = _cli(["check", str(spec), "--candidate", shas["readme"], "--baseline", str(base_id),
                      "--min-effect", "100%", "--markdown", str(md2)], capsys)
    print(out)
    assert code == 0, out
    assert md2.read_text().startswith("## :white_check_mark: xferlab check: no regression")
    assert f"vs baseline **campaign {base_id}**" in md2.read_text()

    # the build rows carry the source entry of the contract; the cells one series ("git")
    with Session(engine) as s:
        rows = s.execute(select(Cell.server_version, ServerBuild.version, ServerBuild.info)
                         .join(ServerBuild, Cell.build_id == ServerBuild.id)
                         .where(Cell.campaign_id == cand_id)).all()
        n_builds = s.scalar(select(func.count(func.distinct(Cell.build_id))).where(Cell.campaign_id == cand_id))
    assert rows and n_builds == 1
    sv, bver, info = rows[0]
    assert sv == "git" and bver == f"2.2.0+g{shas['slow'][:12]}"
    assert info["source"] == {"location": str(repo["path"]), "ref": shas["slow"][:10], "commit": shas["slow"],
                              "dirty_hash": None, "subject": "RETR: wait 50 ms",
                              "author_date": "2026-01-01T00:00:00Z", "commit_index": 4}


@pytest.mark.docker
def test_the_slow_commit_in_a_container_image_tagged_by_it(repo, dbackend, client):
    from runner.spec.request import ServerRequest
    from tests.support.source_image import start_at_commit

    sha = repo["shas"]["slow"]
    h = start_at_commit(dbackend, client, ServerRequest("pyftpdlib", source=str(repo["path"]), ref=sha),
                        sha, f"2.2.0+g{sha[:12]}")
    try:
        info = h.build_info
        assert info["source"]["subject"] == "RETR: wait 50 ms"
        # the image holds the commit's code: the sleep is in its RETR handler
        code, out = client.containers.get(info["container"]).exec_run(
            ["/opt/venv/bin/python", "-c", "import inspect, pyftpdlib.handlers.ftp.control as c; "
             "print('time.sleep(0.05)' in inspect.getsource(c.FTPHandler.ftp_RETR))"])
        assert (code, out.decode().strip()) == (0, "True")
    finally:
        h.stop()
