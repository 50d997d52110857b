"""Report context: "Conducted on" and "Setup" tables in the exports, and the
environment differences of a comparison across two campaigns."""
from __future__ import annotations

from runner.metrics.environment import snapshot
from runner.report import md, rst
from runner.report.context import context_table, environment_diff_table, setup_table
from tests.runner.report.test_report_exports import assert_docutils_clean

SETUPS = {"tpd": {"version": "0.1 (src 1a2b)", "backend": "docker", "obtained": "image xferlab/tpd (cached)",
                  "config_hash": "0123456789abcdef0123", "storage": "disk", "storage_fs": "ext4",
                  "network": "bridge"},
          "vsftpd 3.0.3": {"version": "3.0.3", "backend": "local", "variant": {"use_sendfile": False}}}


def test_context_of_this_machine_names_what_the_seeds_name():
    env = snapshot({"backend": "docker", "pinning": {"server": [0], "client": [1]},
                    "driver": {"name": "xferlab-ftp", "version": "1"}})
    t = context_table(env, SETUPS)
    items = {r.cells[0].text: r.cells[1].text for r in t.rows}
    assert t.title == "Conducted on"
    assert {"machine", "CPU", "memory", "kernel", "Python", "xferlab", "backend", "link", "pinning",
            "driver", "sysctls"} <= set(items), items
    assert f"{env['cores']} logical CPUs" in items["CPU"] and env["kernel"] in items["kernel"]
    assert items["link"] == "docker bridge: veth pair and bridge to the container's address"
    assert items["driver"] == "xferlab-ftp" and "net.ipv4.tcp_syncookies=" in items["sysctls"]
    assert context_table({}) is None
    # only what was recorded is listed
    small = context_table({"kernel": "6.1", "backend": "local"})
    assert [r.cells[0].text for r in small.rows] == ["kernel", "backend", "link"]


def test_cpu_says_what_was_usable_for_what():
    from runner.report.context import cpu_text

    two = {"cpu_model": "AMD EPYC", "cores": 2, "cores_usable": 1}
    # the 2-core machine: the server had one CPU, the load generator the other
    assert cpu_text({**two, "pinning": {"server": [0], "client": [1]}}) == \
        "AMD EPYC, 2 logical CPUs: server CPU 0, client CPU 1"
    assert cpu_text({"cores": 8, "cores_usable": 6, "pinning": {"server": [0, 1], "client": [2, 3, 4, 5, 6, 7]}}) == \
        "8 logical CPUs: server CPUs 0, 1, client CPUs 2, 3, 4, 5, 6, 7"
    assert cpu_text({**two, "pinning": {"server": [0], "client": None}}) == \
        "AMD EPYC, 2 logical CPUs: server CPU 0, client not pinned (1 CPU usable)"
    assert cpu_text({**two, "pinning": {"server": None, "client": [1]}}) == \
        "AMD EPYC, 2 logical CPUs: server not pinned, client CPU 1"
    # not pinned: all usable says nothing more; fewer usable says by whom
    assert cpu_text({"cores": 2, "cores_usable": 2, "pinning": {"server": None, "client": None}}) == "2 logical CPUs"
    assert cpu_text({"cores": 4, "cores_usable": 2}) == "4 logical CPUs (2 usable by server and client, not pinned)"
    assert cpu_text({}) == "n/a"
    rows = {r.cells[0].text: r.cells[1].text
            for r in context_table({**two, "pinning": {"server": [0], "client": [1]}}).rows}
    assert rows["CPU"] == "AMD EPYC, 2 logical CPUs: server CPU 0, client CPU 1" and "usable)" not in rows["CPU"]


def test_setup_table_and_rst_export_parse_cleanly():
    s = setup_table(["tpd", "vsftpd 3.0.3", "pureftpd"], SETUPS)
    assert [r.cells[0].text for r in s.rows] == ["tpd", "vsftpd 3.0.3"]     # no setup, no row
    tpd = {c.key: cell.text for c, cell in zip(s.columns, s.rows[0].cells)}
    assert tpd == {"server": "tpd", "version": "0.1 (src 1a2b)", "obtained": "image xferlab/tpd (cached)",
                   "config": "0123456789ab", "variant": "n/a", "storage": "disk (ext4)", "network": "bridge"}
    assert s.rows[1].cells[4].text == "use_sendfile=False" and s.rows[1].cells[6].text == "loopback"
    env = snapshot({"backend": "local"})
    out = rst.render([context_table(env, SETUPS), s])
    assert "Conducted on\n------------" in out and "Setup\n-----" in out
    assert_docutils_clean(out)
    assert "| machine " in md.render([context_table(env, SETUPS)])


def test_environment_differences_of_two_campaigns():
    a = {"kernel": "6.1.0", "cores": 2, "sysctls": {"net.core.somaxconn": "4096", "net.ipv4.tcp_syncookies": "1"},
         "backend": "local", "python": "3.11.7", "env_class": "aaa"}
    b = {**a, "kernel": "6.18.4", "sysctls": {**a["sysctls"], "net.ipv4.tcp_syncookies": "0"},
         "backend": "docker", "env_class": "bbb", "cpu_governor": ["performance"]}
    t = environment_diff_table(a, b, "tpd (#1)", "tpd (#2)")
    assert [c.header for c in t.columns] == ["item", "tpd (#1)", "tpd (#2)"]
    rows = {r.cells[0].text: (r.cells[1].text, r.cells[2].text) for r in t.rows}
    assert rows == {"backend": ("local", "docker"), "cpu_governor": ("n/a", "performance"),
                    "kernel": ("6.1.0", "6.18.4"), "sysctls.net.ipv4.tcp_syncookies": ("1", "0")}
    assert environment_diff_table(a, dict(a), "x", "y") is None
    assert environment_diff_table(a, {}, "x", "y") is None


def test_compare_across_campaigns_lists_the_environment_differences(engine):
    from sqlalchemy.orm import Session

    from runner.report.render import compare_report
    from runner.spec.model import parse_spec
    from runner.store import campaigns as crud
    from runner.store.models import Cell, Sample

    ids = []
    with Session(engine, expire_on_commit=False) as s:
        for kernel, cookies in (("6.1.0", "1"), ("6.18.4", "0")):
            spec = parse_spec({"name": f"k{kernel}", "repeats": 2, "servers": [{"name": "tpd"}],
                               "workloads": [{"name": "retr"}]})
            camp = crud.create_campaign(s, spec=spec, backend="local")
            s.commit()
            env = crud.get_or_create_environment(
                s, data={"kernel": kernel, "backend": "local", "sysctls": {"net.ipv4.tcp_syncookies": cookies}},
                env_class=f"c{kernel}")
            build = crud.get_or_create_build(s, info={"name": "tpd", "version": "0.1", "variant": {},
                                                      "backend": "local", "obtained": "built now"})
            for i, c in enumerate(s.query(Cell).filter(Cell.campaign_id == camp.id)):
                c.status = "running"
                crud.finish_cell(s, cell=c, status="done", build=build, environment=env,
                                 samples=[Sample(metric="throughput", stat="value", value=1000.0 + i, unit="MiB/s"),
                                          Sample(metric="server_cpu_per_gib", stat="value", value=0.3 + i / 100,
                                                 unit="s/GiB")])
            ids.append(camp.id)
        out = compare_report(s, f"{ids[0]}:tpd", f"{ids[1]}:tpd", fmt="md")
        csv_out = compare_report(s, f"{ids[0]}:tpd", f"{ids[1]}:tpd", fmt="csv")
    assert "## Environment differences" in out and "## Setup" in out
    assert "## Server CPU per unit of work: tpd (#1) vs. tpd (#2)" in out and "s/GiB" in out
    assert "| kernel                           | 6.1.0    | 6.18.4   |" in out, out
    assert "sysctls.net.ipv4.tcp\\_syncookies" in out
    assert "Setup" not in csv_out and "kernel" not in csv_out     # CSV: the comparison alone


def test_link_row_names_the_shaped_links_of_the_servers():
    """Servers of a link axis (runner.spec.axes): the shaped links are named beside the
    loopback the others use."""
    setups = {"tpd [link=loopback]": {"variant": {"link": "loopback"}},
              "tpd [link=100mbit]": {"variant": {"link": "100mbit"}},
              "vsftpd [link=100mbit/1ms]": {"variant": {"link": "100mbit/1ms"}}}
    t = context_table({"backend": "local"}, setups)
    items = {r.cells[0].text: r.cells[1].text for r in t.rows}
    assert items["link"] == ("loopback (127.0.0.1), one machine; servers with variant link 100mbit, 100mbit/1ms: "
                             "a veth pair between two lab network namespaces, shaped by tc on both ends "
                             "(docs/methodology.md, \"Link conditions\")")
    plain = context_table({"backend": "local"}, {"tpd [link=loopback]": {"variant": {"link": "loopback"}}})
    assert {r.cells[0].text: r.cells[1].text for r in plain.rows}["link"] == "loopback (127.0.0.1), one machine"
