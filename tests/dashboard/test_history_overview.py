"""The history overview (runner.history.overview) and its page: filters by server, workload
and figure, groups, sparkline medians checked against Python's own median of the stored
values, tracks and titles as a person reads them."""
from __future__ import annotations

import statistics
from typing import get_args

import pytest

from dashboard.deps import FigureName, GroupName
from dashboard.services.history import GROUPS, group_series, sparkline
from runner.history import FIGURES, benchmark_title, track_text

PY = {"name": "pyftpdlib", "version": "2.2.0"}
PY_NOSF = {"name": "pyftpdlib", "version": "2.2.0", "variant": {"use_sendfile": False}}
RETR = [[1000, 1010, 990, 1005], [900, 910, 905, 880], [700, 720, 710, 690]]
LOGIN = [[0.10, 0.11, 0.10, 0.12], [0.2, 0.2, 0.2, 0.2], [0.1, 0.3, 0.2, 0.4]]


def test_query_types_follow_the_catalogues():
    assert get_args(FigureName) == tuple(FIGURES) and get_args(GroupName) == tuple(GROUPS)


def test_track_text_and_benchmark_title():
    assert track_text("{}") == "default" and track_text("pyftpdlib-dev") == "pyftpdlib-dev"
    assert track_text('{"use_sendfile": false, "backlog": 512}') == "use_sendfile=false, backlog=512"
    assert track_text('{"storage": "tmpfs"}') == "storage=tmpfs" and track_text("{not json") == "{not json"
    assert benchmark_title("login", "clients=300,login_mode=concurrent,op_timeout=30.0") == \
        "300 concurrent clients (connect, login)"
    assert benchmark_title("retr_sustained", "clients=4,duration=1.0,file_size=1048576,rate=20.0,session=reuse,"
                                             "user_rate=1048576") == "4 clients RETR 1M for 1 s (reuse, open loop 20/s)"
    assert benchmark_title("login", "") == "N concurrent clients (connect, login)"  # a key without clients
    assert benchmark_title("login", "clients=0") == "N concurrent clients (connect, login)"  # refused by the model
    assert benchmark_title("nope", "") == "nope"


def test_sparkline_geometry():
    s = sparkline([1.0, 2.0, 3.0], width=120, height=28, pad=3)
    assert s["points"] == "3.0,25.0 60.0,14.0 117.0,3.0" and s["last"] == (117.0, 3.0)
    assert (s["low"], s["high"]) == (1.0, 3.0)
    assert sparkline([5.0, 5.0])["points"] == "3.0,14.0 117.0,14.0"  # equal values: a flat line at mid-height
    assert sparkline([7.0])["points"] == "60.0,14.0"
    with pytest.raises(ValueError):
        sparkline([])


def test_groups_open_within_the_row_budget():
    rows = [{"server": f"s{i:02d}", "track": "{}", "track_text": "default", "workload": "retr", "params_key": "k",
             "metric": "", "figure": "throughput (MiB/s)", "benchmark": "RETR", "workload_title": "RETR"}
            for i in range(25)]
    groups = group_series(rows, "server", open_rows=10)
    assert len(groups) == 25 and [g["open"] for g in groups] == [True] * 10 + [False] * 15
    assert [g["title"] for g in groups[:2]] == ["s00", "s01"]
    one = group_series(rows, "benchmark", open_rows=10)
    assert len(one) == 1 and one[0]["open"] and len(one[0]["rows"]) == 25  # the first group opens whatever its size
    assert one[0]["title"] == "RETR: throughput (MiB/s)" and one[0]["subtitle"] == "k"
    with pytest.raises(ValueError):
        group_series(rows, "colour")


def test_overview_api_filters_and_medians(client, store_campaign):
    cids = [store_campaign([PY, PY_NOSF], {(0, "retr"): RETR[i], (1, "retr"): [v * 0.6 for v in RETR[i]],
                                           (0, "login"): LOGIN[i], (1, "login"): LOGIN[i]})
            for i in range(3)]
    primary = client.get("/api/history/series", params={"figure": "primary"}).json()
    assert {(r["track_text"], r["workload"]) for r in primary} == {
        ("default", "retr"), ("use_sendfile=false", "retr"), ("default", "login"), ("use_sendfile=false", "login")}
    retr = next(r for r in primary if r["workload"] == "retr" and r["track_text"] == "default")
    assert retr["spark"] == pytest.approx([statistics.median(v) for v in RETR])
    assert retr["last"] == pytest.approx(705.0) and retr["previous"] == pytest.approx(902.5)
    assert retr["change"] == pytest.approx(705.0 / 902.5 - 1) and retr["higher_is_better"] is True
    assert retr["points"] == 3 and retr["last_campaign"] == cids[-1] and retr["figure"] == "throughput (MiB/s)"
    login = next(r for r in primary if r["workload"] == "login" and r["track_text"] == "default")
    assert login["spark"] == pytest.approx([0.105, 0.2, 0.25]) and login["workload_title"].startswith("10 concurrent")
    # memory in MiB (the fixture stores bytes: a peak of 9e6 (1 + noise below 1%) for server 0)
    mem = client.get("/api/history/series", params={"figure": "server_mem_uss", "workload": "retr"}).json()
    assert len(mem) == 2 and all(r["metric"] == "server_mem_uss" and r["unit"] == "MiB" for r in mem)
    assert all(9e6 / 2**20 <= v <= 11e6 * 1.01 / 2**20 for r in mem for v in r["spark"])
    cpu = client.get("/api/history/series", params={"figure": "server_cpu"}).json()
    assert {r["metric"] for r in cpu} == {"server_cpu_per_gib", "server_cpu_per_op"} and len(cpu) == 4
    assert len(client.get("/api/history/series").json()) == 4 * 4  # every figure by default: primary, 2 memory, CPU
    assert client.get("/api/history/series", params={"server": "tpd"}).json() == []
    assert client.get("/api/history/series", params={"figure": "colour"}).status_code == 422
    assert client.get("/api/history/series", params={"server": "x" * 41}).status_code == 422


def test_history_page_groups_and_filters(client, store_campaign):
    for i in range(2):
        store_campaign([PY, PY_NOSF], {(0, "retr"): RETR[i], (1, "retr"): RETR[i],
                                       (0, "login"): LOGIN[i], (1, "login"): LOGIN[i]})
    page = client.get("/history").text
    assert page.count('<details class="series-group"') == 2 and page.count("<svg class=\"spark\"") == 4
    assert "selected>pyftpdlib</option>" not in page and ">pyftpdlib</option>" in page  # any server
    assert "selected>pyftpdlib</option>" in client.get("/history", params={"server": "pyftpdlib"}).text
    by_server = client.get("/history", params={"group": "server", "figure": "all"}).text
    assert by_server.count('<details class="series-group"') == 2
    assert "<b>pyftpdlib use_sendfile=false</b>" in by_server and "<b>pyftpdlib</b>" in by_server
    by_figure = client.get("/history", params={"group": "figure", "figure": "all"}).text
    assert by_figure.count('<details class="series-group"') == 6  # throughput, elapsed, 2 memory, 2 CPU
    only = client.get("/history", params={"workload": "login", "server": ""}).text
    assert only.count('data-workload="login"') == 2 and 'data-workload="retr"' not in only
    assert "No series matches" in client.get("/history", params={"server": "tpd"}).text
    assert client.get("/history", params={"group": "colour"}).status_code == 422
