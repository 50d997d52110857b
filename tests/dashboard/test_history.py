"""Regression detection (runner.history) on real PostgreSQL rows."""
from __future__ import annotations

import pytest
from sqlalchemy.orm import Session

from runner.history import SeriesKey, find_regressions, list_series, series_points

DEV = {"name": "pyftpdlib", "version": "2.2.0", "label": "pyftpdlib-dev"}


def _dev(variant=None):
    return {**DEV, "variant": variant or {}}


def test_series_points_and_regression(engine, store_campaign):
    c1 = store_campaign([_dev()], {(0, "retr"): [1000, 1010, 990, 1005], (0, "login"): [0.10, 0.11, 0.10, 0.12]})
    c2 = store_campaign([_dev({"use_sendfile": False})],
                        {(0, "retr"): [600, 610, 590, 605], (0, "login"): [0.10, 0.12, 0.11, 0.10]})
    c3 = store_campaign([_dev()], {(0, "retr"): [1000, 1020, 995, 1001], (0, "login"): [0.2, 0.21, 0.22, 0.2]},
                        env_class="envB")
    with Session(engine) as s:
        series = list_series(s)
        assert {(x["track"], x["workload"], x["points"]) for x in series} == {
            ("pyftpdlib-dev", "retr", 3), ("pyftpdlib-dev", "login", 3)}
        key = SeriesKey("pyftpdlib", "pyftpdlib-dev", "retr", series[0]["params_key"] if series[0]["workload"] == "retr"
                        else series[1]["params_key"])
        pts = series_points(s, key=key)
        assert [p.campaign_id for p in pts] == [c1, c2, c3]
        assert pts[0].summary.median == pytest.approx(1002.5) and pts[0].env_class == "envA"
        changes = find_regressions(s)
    kinds = {(c.key.workload, c.before.campaign_id, c.after.campaign_id): c.kind for c in changes}
    # c1 -> c2: RETR 40% slower, Mann-Whitney p = 0.029 (4 vs 4, all apart): a regression
    assert kinds[("retr", c1, c2)] == "regression"
    # c2 -> c3: the environment changed: marked, not compared (even though RETR got faster and login slower)
    assert kinds[("retr", c2, c3)] == "env_changed" and kinds[("login", c2, c3)] == "env_changed"
    assert ("login", c1, c2) not in kinds  # no significant change
    reg = next(c for c in changes if c.kind == "regression")
    assert reg.p_value < 0.05 and reg.effect == pytest.approx(1002.5 / 602.5 - 1, rel=1e-3)
    assert reg.as_dict()["before"]["campaign_id"] == c1


def test_thresholds_are_configurable(engine, store_campaign):
    store_campaign([_dev()], {(0, "retr"): [1000, 1001, 1002, 1003], (0, "login"): [0.1] * 4})
    store_campaign([_dev()], {(0, "retr"): [980, 981, 982, 983], (0, "login"): [0.1] * 4})
    with Session(engine) as s:
        # 2% slower, significant by the test, but below the default 5% minimum effect
        assert find_regressions(s) == []
        got = find_regressions(s, min_effect=0.01)
        assert [c.kind for c in got] == ["regression"]
        assert find_regressions(s, min_effect=0.01, alpha=0.01) == []  # p = 0.029
        with pytest.raises(ValueError):
            find_regressions(s, alpha=0)


def test_history_api_and_pages(client, store_campaign):
    store_campaign([_dev()], {(0, "retr"): [1000, 1010, 990, 1005], (0, "login"): [0.1] * 4})
    store_campaign([_dev({"use_sendfile": False})], {(0, "retr"): [600, 610, 590, 605], (0, "login"): [0.1] * 4})
    series = client.get("/api/history/series").json()
    retr = next(x for x in series if x["workload"] == "retr")
    d = client.get("/api/history", params={k: retr[k] for k in ("server", "track", "workload", "params_key")}).json()
    assert len(d["points"]) == 2 and d["changes"][0]["kind"] == "regression" and d["unit"] == "MiB/s"
    r = client.get("/api/regressions").json()
    assert [c["kind"] for c in r["changes"]] == ["regression"] and r["alpha"] == 0.05
    html = client.get("/regressions").text
    assert "kind-regression" in html and "/compare?a=1" in html
    assert client.get("/history/series", params={k: retr[k] for k in ("server", "track", "workload",
                                                                      "params_key")}).status_code == 200


def _scale(engine, campaign_id: int, metric: str, factor: float, stat: str = "peak") -> None:
    """Multiply the ``metric``/``stat`` samples of a campaign's cells (a regression made
    after the fact), then recompute the history points as any writer of samples outside
    finish_cell must (runner.store.points)."""
    from sqlalchemy import text

    from runner.store.points import rebuild_points

    with engine.begin() as c:
        c.execute(text("UPDATE sample SET value = value * :f WHERE metric = :m AND stat = :s AND cell_id IN "
                       "(SELECT id FROM cell WHERE campaign_id = :c)"),
                  {"f": factor, "m": metric, "s": stat, "c": campaign_id})
    with Session(engine) as s:
        rebuild_points(s)
        s.commit()


def test_memory_series_and_memory_regression(engine, client, store_campaign):
    retr = [1000, 1010, 990, 1005]
    cids = [store_campaign([_dev()], {(0, "retr"): retr, (0, "login"): [0.1] * 4}, workloads=("retr",))
            for _ in range(4)]
    _scale(engine, cids[-1], "server_mem_uss", 1.3)  # the newest campaign's server uses 30% more
    with Session(engine) as s:
        series = list_series(s)
        assert {x["metric"] for x in series} == {"", "server_mem_uss", "server_mem_rss_minus_shared",
                                                 "server_cpu_per_gib"}
        mem = next(x for x in series if x["metric"] == "server_mem_uss")
        assert mem["points"] == 4 and mem["title"].endswith("server memory (peak USS)")
        key = SeriesKey(mem["server"], mem["track"], mem["workload"], mem["params_key"], "server_mem_uss")
        pts = series_points(s, key=key)
        assert [p.unit for p in pts] == ["MiB"] * 4 and 8.5 < pts[0].median < 8.7  # 9e6 bytes * (1..1.01)
        changes = find_regressions(s)
    assert [(c.kind, c.key.metric, c.after.campaign_id) for c in changes] == [
        ("regression", "server_mem_uss", cids[-1])]
    assert changes[0].method in ("step", "latest")  # a 30% jump on 0.5% noise: the detector may take it too
    ch = changes[0]
    assert ch.higher_is_better is False and ch.effect == pytest.approx(0.3, abs=0.02) and ch.q_value < 0.05
    # the API: the memory series by its metric, the regression with the new fields
    params = {k: mem[k] for k in ("server", "track", "workload", "params_key", "metric")}
    d = client.get("/api/history", params=params).json()
    assert d["unit"] == "MiB" and d["series"]["metric"] == "server_mem_uss" and d["changes"][-1]["kind"] == "regression"
    r = client.get("/api/regressions").json()
    assert r["window"] == 50 and r["changes"][0]["series"]["metric"] == "server_mem_uss"
    assert r["changes"][0]["method"] in ("step", "latest") and r["changes"][0]["q_value"] < 0.05
    assert client.get("/api/history", params={**params, "metric": "cpu"}).status_code in (400, 422)
    assert "metric=server_mem_uss" in client.get("/history?figure=server_mem_uss").text
    assert "metric=server_mem_uss" not in client.get("/history").text  # the default: primary figures
    assert client.get("/history/series", params=params).status_code == 200


def test_step_found_and_jitter_ignored_on_stored_campaigns(engine, store_campaign):
    """Six campaigns: RETR steps down by 40% from the fourth on and stays; login jitters
    by 6% from campaign to campaign (tight repeats). The old pair rule reported the login
    jitter as 2 regressions and 2 improvements (each pair p = 0.029, 6%)."""
    def camp(r, lg):
        return store_campaign([_dev()], {(0, "retr"): [r, r + 5, r - 5, r + 2], (0, "login"): [lg, lg, lg, lg * 1.001]})
    cids = [camp(r, lg) for r, lg in ((1000, 0.100), (1000, 0.106), (1000, 0.100), (600, 0.106), (600, 0.100),
                                      (600, 0.100))]
    with Session(engine) as s:
        changes = find_regressions(s)
    assert [(c.kind, c.key.workload, c.before.campaign_id, c.after.campaign_id) for c in changes] == [
        ("regression", "retr", cids[2], cids[3])]
    assert changes[0].key.metric == "" and changes[0].method == "step"
    assert changes[0].points_before == 3 and changes[0].points_after == 3


def test_cpu_cost_series_and_cpu_regression(engine, client, store_campaign):
    """Server CPU per unit of work is a series of its own (s/GiB for RETR, us/op for
    logins; lower is better): listed with its unit, checked for regressions, shown on
    the history pages."""
    retr = [1000, 1010, 990, 1005]
    cids = [store_campaign([_dev()], {(0, "retr"): retr, (0, "login"): [0.1] * 4}) for _ in range(4)]
    _scale(engine, cids[-1], "server_cpu_per_gib", 1.3, stat="value")  # the newest costs 30% more CPU per GiB
    with Session(engine) as s:
        series = list_series(s)
        cost = {x["metric"]: x for x in series if x["metric"].startswith("server_cpu")}
        assert {(m, x["workload"], x["unit"]) for m, x in cost.items()} == {
            ("server_cpu_per_gib", "retr", "s/GiB"), ("server_cpu_per_op", "login", "us/op")}
        gib = cost["server_cpu_per_gib"]
        assert gib["points"] == 4 and gib["title"].endswith("RETR (server -> client), server CPU per GiB")
        key = SeriesKey(gib["server"], gib["track"], gib["workload"], gib["params_key"], "server_cpu_per_gib")
        pts = series_points(s, key=key)
        assert [p.unit for p in pts] == ["s/GiB"] * 4 and 0.3 <= pts[0].median < 0.303
        assert 0.39 < pts[-1].median < 0.394
        changes = find_regressions(s)
    assert [(c.kind, c.key.metric, c.after.campaign_id, c.unit) for c in changes] == [
        ("regression", "server_cpu_per_gib", cids[-1], "s/GiB")]
    assert changes[0].higher_is_better is False and changes[0].effect == pytest.approx(0.3, abs=0.02)
    params = {k: gib[k] for k in ("server", "track", "workload", "params_key", "metric")}
    d = client.get("/api/history", params=params).json()
    assert d["unit"] == "s/GiB" and d["title"].endswith("server CPU per GiB") and len(d["points"]) == 4
    assert d["changes"][-1]["kind"] == "regression" and d["changes"][-1]["higher_is_better"] is False
    r = client.get("/api/regressions").json()
    assert [(c["series"]["metric"], c["unit"]) for c in r["changes"]] == [("server_cpu_per_gib", "s/GiB")]
    page = client.get("/history?figure=server_cpu&group=server").text
    assert "metric=server_cpu_per_gib" in page and "metric=server_cpu_per_op" in page
    assert "server CPU per GiB (s/GiB)</td>" in page and "server CPU per operation (us/op)</td>" in page
    # a variant track is shown as its options, not as JSON; a label as it is
    store_campaign([{"name": "pyftpdlib", "version": "2.2.0", "variant": {"use_sendfile": False}}],
                   {(0, "retr"): retr, (0, "login"): [0.1] * 4}, workloads=("retr",))
    page = client.get("/history?figure=server_cpu&group=workload").text
    assert '<td class="track">use_sendfile=false</td>' in page and '<td class="track">pyftpdlib-dev</td>' in page
    assert ">RETR (server -&gt; client)</a></td><td class=\"small\">server CPU per GiB (s/GiB)</td>" in page
    assert "false}" not in page.replace("&#34;", '"')
    sp = client.get("/history/series", params=params).text
    assert "server CPU per GiB" in sp and "s/GiB" in sp
    assert "server CPU per GiB" in client.get("/regressions").text
