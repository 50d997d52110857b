"""The ``xferlab`` command's registry: every subcommand is registered once with a
handler that exists, and user errors exit 2 with a message (no traceback)."""
from __future__ import annotations

from importlib import import_module

import pytest

from runner.cli import COMMANDS, build_parser, main, parse_args


def test_registry_handlers_exist_and_parse():
    names = [c.name for c in COMMANDS]
    assert len(names) == len(set(names))
    for c in COMMANDS:
        module, _, func = c.handler.partition(":")
        assert callable(getattr(import_module(module), func)), c.handler
    args = build_parser().parse_args(["export", "3", "--format", "md"])
    assert (args.command, args.id, args.format, args.handler) == ("export", 3, "md", "runner.cli.read:cmd_export")


def test_a_command_is_parsed_with_its_own_arguments_only():
    """A fresh interpreter that parses ``loadgen``'s arguments imports neither the Docker
    SDK nor the image builder (what ``images``' arguments are made from); ``images`` still
    gets its own, and ``xferlab --help`` lists every command."""
    import subprocess
    import sys

    code = ("import sys; from runner.cli import parse_args; "
            "a = parse_args(['loadgen', '--host', '127.0.0.1', '--port', '21', '--workload', 'retr', "
            "'--user', 'u', '--password', 'p', '--start-at', '0']); "
            "print(a.command, a.host, "
            "sorted(m for m in sys.modules if m == 'docker' or m.startswith('runner.backends')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["loadgen", "127.0.0.1", "[]"], out.stdout + out.stderr
    args = parse_args(["-v", "images", "build", "--jobs", "3", "tpd"])
    assert (args.command, args.images_cmd, args.jobs, args.names, args.verbose) == ("images", "build", 3, ["tpd"], True)
    with pytest.raises(SystemExit):
        parse_args(["images", "build", "--jobs", "9"])
    shown = build_parser(only="").format_help()
    assert all(f"    {c.name} " in shown or f"    {c.name}\n" in shown for c in COMMANDS), shown


def test_servers_fetch_unknown_name_is_a_user_error(capsys):
    """Was AttributeError: runner.backends.local has no fetch_debian_server."""
    assert main(["servers", "--fetch", "nosuch"]) == 2
    err = capsys.readouterr().err
    assert "xferlab: error: --fetch 'nosuch': not a Debian-packaged server; one of vsftpd" in err


def test_selftest_options_go_to_the_script(capsys):
    """Was: ``xferlab selftest --quick`` -> 'xferlab: error: unrecognized arguments'."""
    assert parse_args(["-v", "selftest", "--quick", "--size", "8"]).rest == ["--quick", "--size", "8"]
    with pytest.raises(SystemExit) as e:
        main(["selftest", "--no-such-option"])
    assert e.value.code == 2
    assert "loadgen_selftest: error: unrecognized arguments: --no-such-option" in capsys.readouterr().err


def test_classic_preset_adaptive_reused_and_windowed_setup():
    """The classic preset: repeats auto, a row's repeats on one server, setup logins in a
    window and the login row concurrent; ``--repeats N`` makes it a fixed N."""
    from runner.cli.campaign import _build_spec

    spec = _build_spec(parse_args(["run", "--preset", "classic"]))
    assert (spec.repeats, spec.max_repeats, spec.server_reuse) == (3, 5, "repeats")
    modes = {n: w.params.login_mode for w in spec.workloads for n in w.names()}
    assert list(modes) == ["stor", "retr", "login", "stor_idle", "retr_idle", "retr_concurrent",
                           "stor_concurrent", "quit"]
    assert modes["login"] == "concurrent" and {modes[n] for n in modes if n not in ("stor", "retr", "login")} \
        == {"window"}
    assert all(w.params.clients == 300 and w.params.file_size == 10 << 20 for w in spec.workloads)
    fixed = _build_spec(parse_args(["run", "--preset", "classic", "--repeats", "2"]))
    assert (fixed.repeats, fixed.max_repeats) == (2, None)
    assert _build_spec(parse_args(["run", "--preset", "classic", "--repeats", "auto"])).max_repeats == 5


def test_run_driver_option():
    """``xferlab run --driver wget --workloads retr_concurrent``: the spec's driver; a
    workload the driver cannot run is the spec's error."""
    from runner.cli.campaign import _build_spec
    from runner.spec.model import SpecError

    spec = _build_spec(parse_args(["run", "--preset", "classic", "--driver", "wget", "--workloads",
                                   "retr_concurrent", "--clients", "512", "--file-size", "1M"]))
    assert spec.driver == "wget" and [w.name for w in spec.workloads] == ["retr_concurrent"]
    assert spec.workloads[0].params.clients == 512 and spec.workloads[0].params.file_size == 1 << 20
    classic = _build_spec(parse_args(["run", "--preset", "classic"]))
    assert classic.driver is None  # each workload's protocol default: xferlab-ftp for the classic FTP rows
    assert {classic.driver_of(w.params, n) for w in classic.workloads for n in w.names()} == {"xferlab-ftp"}
    with pytest.raises(SpecError, match="driver 'wget' cannot run stor_concurrent"):
        _build_spec(parse_args(["run", "--preset", "classic", "--driver", "wget", "--workloads", "stor_concurrent"]))


def test_axis_options_replace_the_axes_of_a_preset_or_file(tmp_path):
    """--link and --storage replace a preset's (or a file's) axis; they do not add a copy
    of every server to the copies the axis already made."""
    from runner.cli import parse_args
    from runner.cli.campaign import _build_spec

    def labels(*argv):
        return [s.display() for s in _build_spec(parse_args(["run", *argv])).servers]

    assert labels("--preset", "seed004")[:2] == ["tpd [link=loopback]", "tpd [link=100mbit/queue=250ms]"]
    assert labels("--preset", "seed004", "--link", "100mbit")[:2] == ["tpd [link=100mbit/queue=250ms]",
                                                                      "vsftpd [link=100mbit/queue=250ms]"]
    assert labels("--preset", "seed004", "--link", "loopback") == ["tpd", "vsftpd", "proftpd", "pureftpd", "pyftpdlib"]
    assert labels("--preset", "seed002", "--storage", "tmpfs")[:2] == ["tpd [storage=tmpfs]", "go-http [storage=tmpfs]"]
    spec = tmp_path / "s.yaml"
    spec.write_text("servers: [{name: tpd, label: mine}]\nstorage: [disk, tmpfs]\nworkloads: [{name: retr}]\n")
    assert labels(str(spec)) == ["mine [disk]", "mine [tmpfs]"]
    assert labels(str(spec), "--storage", "tmpfs") == ["mine [tmpfs]"]
