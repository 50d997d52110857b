"""The C FTP servers built from a source tree at a commit (runner.backends.local.csrcbuild)
on the local backend.

proftpd is built for real from Debian's upstream tarball (``proftpd-dfsg``'s
``.orig.tar.gz``, fetched by ``scripts/install.sh`` into the cache through
runner.backends.local.debsrc) committed into a git repository the test makes: a cell of
300 logins against it, the build row naming the commit, the cache hit of a second
campaign, a commit that breaks the C compile as a failed cell with the compiler's words,
a profiled cell naming proftpd's own ``pr_*`` functions, and FTPS through its compiled-in
mod_tls with the lab's config.

vsftpd's and pure-ftpd's sources are not served by Debian's archive here (404), so their
recipes are checked on small trees that stand in for them: the arguments each recipe
gives its builder, the symbols kept in what it builds, and a broken compile as a failure.
"""
from __future__ import annotations

import os
import subprocess
import tarfile
import time
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from runner.backends.base import ServerFailed
from runner.backends.local.csrcbuild import (
    C_RECIPES,
    CFLAGS,
    VSFTPD_CFLAGS,
    build_c_server,
    builder_tail,
    steps_of,
    tree_problem,
)
from runner.spec.request import ServerRequest
from tests.support.source_image import start_at_commit

DATE = "2026-02-03T04:05:06Z"
BROKEN = "#error xferlab test: this commit does not compile"


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.org", "GIT_AUTHOR_DATE": DATE, "GIT_COMMITTER_DATE": DATE}
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout.strip()


def _commit_all(repo: Path, msg: str) -> str:
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", msg)
    return _git(repo, "rev-parse", "HEAD")


def _sections(binary: Path) -> set[str]:
    """The ELF section names of ``binary`` (``readelf -S -W``)."""
    out = subprocess.run(["readelf", "-S", "-W", str(binary)], capture_output=True, text=True, check=True).stdout
    return {w for line in out.splitlines() for w in line.replace("]", "] ").split() if w.startswith(".")}


@pytest.fixture
def data_dir(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("XFERLAB_DATA_DIR", str(tmp_path / "data"))
    from runner.config import get_settings

    get_settings.cache_clear()
    yield tmp_path / "data"
    get_settings.cache_clear()


# ---------------------------------------------------------------- the recipes' arguments

def test_each_recipe_keeps_symbols_and_gives_its_builder_fixed_arguments(tmp_path):
    assert "-g" in CFLAGS.split() and set(C_RECIPES) == {"proftpd", "vsftpd", "pureftpd"}
    prof = steps_of("proftpd", tmp_path)
    assert prof[0] == ["./configure", "--enable-openssl", "--with-modules=mod_tls"]
    assert prof[1][0] == "make" and prof[1][1].startswith("-j") and int(prof[1][1][2:]) >= 1
    (vs,) = steps_of("vsftpd", tmp_path)
    flags = next(a for a in vs if a.startswith("CFLAGS=")).removeprefix("CFLAGS=").split()
    assert "-g" in flags and "-Werror" not in flags and "LINK=" in vs  # vsftpd's LINK = -Wl,-s strips
    assert steps_of("pureftpd", tmp_path)[0] == ["sh", "./autogen.sh"]  # no configure: a git checkout
    (tmp_path / "configure").write_text("")
    assert steps_of("pureftpd", tmp_path)[0] == ["./configure", "--with-puredb", "--with-tls"]
    with pytest.raises(ValueError, match="no C build recipe for 'nginx'"):
        steps_of("nginx", tmp_path)


def test_the_image_build_script_is_the_recipe_quoted(tmp_path):
    from runner.backends.local.csrcbuild import build_script

    text = build_script("proftpd", tmp_path)
    assert text.splitlines() == ["set -eu", f"export CFLAGS='{CFLAGS}' LC_ALL=C",
                                 "./configure --enable-openssl --with-modules=mod_tls",
                                 steps_of("proftpd", tmp_path)[1][0] + " " + steps_of("proftpd", tmp_path)[1][1],
                                 "install -m 0755 proftpd /usr/sbin/proftpd"]
    vs = build_script("vsftpd", tmp_path).splitlines()[2]
    assert vs.startswith("make -j") and f"'CFLAGS={VSFTPD_CFLAGS}'" in vs and vs.endswith(" LINK=")
    assert build_script("pureftpd", tmp_path).splitlines()[-1] == "install -m 0755 src/pure-pw /usr/bin/pure-pw"


def test_the_image_context_of_a_c_server_holds_the_tree_the_entrypoint_and_the_recipe(tmp_path, data_dir):
    from runner.backends.docker.images.base import ImageError
    from runner.backends.docker.images.source import _c_context
    from runner.backends.source import export, resolve

    repo = _standin(tmp_path, {"configure": "#!/bin/sh\n", "src/main.c": MAIN_C, "modules/mod_auth_file.c": ""})
    good = _commit_all(repo, "a proftpd stand-in")
    src = resolve(str(repo), good)
    ctx = _c_context("proftpd", src, export(src))
    assert ctx == data_dir / "builds" / good[:16] / "docker-proftpd"
    assert (ctx / "Dockerfile").read_text().startswith("# A C FTP server under test (proftpd)")
    assert (ctx / "server" / "container" / "entrypoint.sh").is_file() and (ctx / "src" / "src" / "main.c").is_file()
    assert (ctx / "build.sh").read_text().endswith("install -m 0755 proftpd /usr/sbin/proftpd\n")
    (repo / "src" / "main.c").unlink()
    gone = _commit_all(repo, "no main.c")
    src2 = resolve(str(repo), gone)
    with pytest.raises(ImageError, match="has no src/main.c at that commit"):
        _c_context("proftpd", src2, export(src2))


def test_the_deb_src_stanza_is_the_machines_own_mirror():
    from runner.backends.local.debsrc import DebSrcError, deb_src_stanza

    sources = ("Types: deb\n# a comment\nURIs: http://mirror.invalid/debian\nSuites: bookworm bookworm-updates\n"
               "Components: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n"
               "Types: deb\nURIs: http://mirror.invalid/debian-security\nSuites: bookworm-security\n")
    assert deb_src_stanza(sources) == ("Types: deb-src\nURIs: http://mirror.invalid/debian\nSuites: bookworm\n"
                                       "Components: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n")
    with pytest.raises(DebSrcError, match="no 'Types: deb' stanza"):
        deb_src_stanza("Types: deb\nURIs: http://mirror.invalid/debian-security\nSuites: bookworm-security\n")
    with pytest.raises(ValueError, match="not a source package xferlab fetches: 'vsftpd'"):
        from runner.backends.local.debsrc import debsrc_dir

        debsrc_dir("vsftpd")


def test_a_tree_of_another_server_is_named_as_such(tmp_path):
    assert tree_problem("proftpd", tmp_path) == ("has no configure, src/main.c, modules/mod_auth_file.c at that "
                                                 "commit (not a proftpd source tree)")
    (tmp_path / "src").mkdir()
    (tmp_path / "autogen.sh").write_text("")
    (tmp_path / "src" / "ftpd.c").write_text("")
    assert tree_problem("pureftpd", tmp_path) is None  # configure comes from autogen.sh


def test_builder_tail_keeps_the_first_compiler_error():
    out = "\n".join(["gcc -c a.c", "a.c:3:2: error: #error broken"] + [f"gcc -c f{i}.c" for i in range(30)])
    tail = builder_tail(out).splitlines()
    assert tail[0] == "first error: a.c:3:2: error: #error broken" and tail[-1] == "gcc -c f29.c"
    assert len(tail) == 22
    assert builder_tail("x\ny") == "x\ny"


# --------------------------------------------- vsftpd and pure-ftpd on stand-in trees

#: A stand-in for vsftpd's own Makefile: its LINK strips (as vsftpd 3.0's does), CFLAGS
#: comes from the command line.
VSFTPD_MAKEFILE = ("CC = gcc\nCFLAGS = -O2 -Werror\nLINK = -Wl,-s\n"
                   "vsftpd: main.c\n\t$(CC) $(CFLAGS) -o vsftpd main.c $(LINK)\n")
#: A stand-in for pure-ftpd's autogen.sh: writes a configure that records its arguments
#: and the CFLAGS it was given, and a Makefile building src/pure-ftpd and src/pure-pw.
PURE_AUTOGEN = r"""#!/bin/sh
cat > configure <<'EOF'
#!/bin/sh
echo "$@" > configure.args
echo "$CFLAGS" > configure.cflags
printf 'all:\n\t$(CC) $(CFLAGS) -o src/pure-ftpd src/ftpd.c\n' > Makefile
printf '\t$(CC) $(CFLAGS) -o src/pure-pw src/pure-pw.c\n' >> Makefile
EOF
chmod +x configure
"""
MAIN_C = "int serve(int n) { return n + 1; }\nint main(void) { return serve(-1); }\n"


def _standin(tmp_path: Path, files: dict[str, str], executable: tuple[str, ...] = ()) -> Path:
    repo = tmp_path / "repo"
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    for rel in executable:
        (repo / rel).chmod(0o755)
    _git(repo, "init", "-q", "-b", "main")
    return repo


def test_vsftpd_recipe_builds_with_symbols_and_a_broken_commit_fails_with_the_compilers_words(tmp_path, data_dir):
    from runner.backends.local import LocalBackend

    repo = _standin(tmp_path, {"Makefile": VSFTPD_MAKEFILE, "main.c": MAIN_C, "builddefs.h": ""})
    good = _commit_all(repo, "a vsftpd stand-in")
    said: list[str] = []
    b = build_c_server("vsftpd", ServerRequest("vsftpd", source=str(repo), ref=good), said.append)
    assert b.built and b.source.commit == good
    assert b.binaries["server"] == data_dir / "builds" / good[:16] / "c-vsftpd" / "vsftpd"
    assert {".symtab", ".debug_info"} <= _sections(b.binaries["server"])  # -g reached gcc, LINK= kept the symbols
    again = build_c_server("vsftpd", ServerRequest("vsftpd", source=str(repo), ref="main"), said.append)
    assert not again.built and again.binaries == b.binaries and sum(m.startswith("building vsftpd") for m in said) == 1
    (repo / "main.c").write_text(BROKEN + "\n" + MAIN_C)
    bad = _commit_all(repo, "broken")
    backend = LocalBackend(progress=said.append)
    with pytest.raises(ServerFailed) as ei:
        backend.check(ServerRequest("vsftpd", source=str(repo), ref=bad))
    msg = str(ei.value)
    assert msg.startswith(f"vsftpd at {bad[:12]}: make -j") and "LINK= failed (exit 2):" in msg
    assert "main.c:1:2: error: #error xferlab test: this commit does not compile" in msg
    with pytest.raises(ServerFailed) as again_e:  # the next cell: the same failure, no second build
        backend.check(ServerRequest("vsftpd", source=str(repo), ref=bad))
    assert str(again_e.value) == msg and sum(m.startswith("building vsftpd") for m in said) == 2


def test_pureftpd_recipe_bootstraps_configures_and_builds_both_binaries(tmp_path, data_dir):
    repo = _standin(tmp_path, {"autogen.sh": PURE_AUTOGEN, "src/ftpd.c": MAIN_C, "src/pure-pw.c": MAIN_C},
                    executable=("autogen.sh",))
    good = _commit_all(repo, "a pure-ftpd stand-in")
    b = build_c_server("pureftpd", ServerRequest("pureftpd", source=str(repo), ref=good), lambda _m: None)
    work = data_dir / "builds" / good[:16] / "c-pureftpd"
    assert b.binaries == {"server": work / "src" / "pure-ftpd", "pure-pw": work / "src" / "pure-pw"}
    assert (work / "configure.args").read_text() == "--with-puredb --with-tls\n"
    assert (work / "configure.cflags").read_text() == CFLAGS + "\n"
    assert ".debug_info" in _sections(b.binaries["server"]) and ".symtab" in _sections(b.binaries["pure-pw"])
    assert b.info("pureftpd")["version"] == f"git-{good[:12]}" and b.info("pureftpd")["source"]["commit"] == good
    (repo / "autogen.sh").write_text("#!/bin/sh\necho 'autoreconf: not found' >&2\nexit 127\n")
    bad = _commit_all(repo, "no autotools")
    with pytest.raises(ServerFailed) as ei:
        build_c_server("pureftpd", ServerRequest("pureftpd", source=str(repo), ref=bad), lambda _m: None)
    assert str(ei.value) == f"pureftpd at {bad[:12]}: sh ./autogen.sh failed (exit 127):\nautoreconf: not found"


def test_an_unresolved_ref_and_a_tree_of_another_server_fail(tmp_path, data_dir):
    repo = _standin(tmp_path, {"README": "not a server\n"})
    _commit_all(repo, "readme")
    with pytest.raises(ServerFailed, match="ref 'v9' does not resolve to a commit"):
        build_c_server("proftpd", ServerRequest("proftpd", source=str(repo), ref="v9"), lambda _m: None)
    with pytest.raises(ServerFailed, match=r"has no configure, src/main.c, modules/mod_auth_file.c at that commit"):
        build_c_server("proftpd", ServerRequest("proftpd", source=str(repo), ref="main"), lambda _m: None)


# ------------------------------------------------------------ proftpd, built for real

@pytest.fixture(scope="module")
def proftpd_repo(tmp_path_factory) -> tuple[Path, str, str]:
    """A git repository of proftpd's upstream tarball: (the repository, the commit of the
    tarball, a commit on branch ``broken`` whose src/main.c does not compile)."""
    from runner.backends.local.debsrc import orig_tarball

    tarball = orig_tarball("proftpd-dfsg")
    if tarball is None:
        pytest.skip("proftpd's source tarball is not in the cache: scripts/install.sh fetches it "
                    "(python -m runner.backends.local.debsrc proftpd-dfsg)")
    repo = tmp_path_factory.mktemp("proftpd") / "proftpd"
    repo.mkdir()
    with tarfile.open(tarball) as tf:
        for m in tf.getmembers():
            m.name = m.name.split("/", 1)[1] if "/" in m.name else ""
        tf.extractall(repo, members=[m for m in tf.getmembers() if m.name], filter="data")
    _git(repo, "init", "-q", "-b", "main")
    good = _commit_all(repo, f"proftpd from {tarball.name}")
    _git(repo, "checkout", "-q", "-b", "broken")
    main_c = repo / "src" / "main.c"
    main_c.write_text(BROKEN + "\n" + main_c.read_text())
    bad = _commit_all(repo, "a commit that does not compile")
    _git(repo, "checkout", "-q", "main")
    return repo, good, bad


@pytest.fixture(scope="module")
def proftpd_data(tmp_path_factory) -> Path:
    """One data dir (the build cache) for the proftpd tests of this module: built once."""
    from runner.config import get_settings

    d = tmp_path_factory.mktemp("proftpd-data")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XFERLAB_DATA_DIR", str(d))
        get_settings.cache_clear()
        yield d
    get_settings.cache_clear()


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    """A campaign's CA and server certificate (runner.tls.certs)."""
    from runner.tls.certs import campaign_certificates

    return campaign_certificates("test", folder=tmp_path_factory.mktemp("tls") / "c")


def _campaign(engine, repo: Path, ref: str, workload: dict) -> tuple[int, str, str | None, dict | None]:
    """Run a one-cell campaign of proftpd at ``ref``: (campaign id, status, error, build info)."""
    from runner.campaign.loop import run_campaign
    from runner.spec.model import parse_spec
    from runner.store import campaigns as crud
    from runner.store.models import Cell, ServerBuild

    spec = parse_spec({"servers": [{"name": "proftpd", "source": str(repo), "ref": ref}], "workloads": [workload],
                       "repeats": 1, "backend": "local", "warmup": False})
    with Session(engine) as s:
        cid = crud.create_campaign(s, spec=spec, backend="local").id
        s.commit()
    run_campaign(engine, cid)
    with Session(engine) as s:
        cell = s.execute(select(Cell).where(Cell.campaign_id == cid)).scalar_one()
        build = s.get(ServerBuild, cell.build_id) if cell.build_id else None
        return cid, cell.status, cell.error, ({"id": build.id, "version": build.version, **build.info}
                                              if build else None)


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_proftpd_from_source_serves_logins_is_cached_and_a_broken_commit_fails(proftpd_repo, engine, proftpd_data):
    from runner.store.models import Cell, Sample

    repo, good, bad = proftpd_repo
    login = {"name": "login", "params": {"clients": 300}}
    t0 = time.monotonic()
    cid, status, error, build = _campaign(engine, repo, good, login)
    first_s = time.monotonic() - t0
    assert status == "done", error
    assert build is not None and build["version"] == f"git-{good[:12]}" and build["source"]["commit"] == good
    assert build["source"]["ref"] == good and build["source"]["dirty_hash"] is None
    assert build["binary"] == str(proftpd_data / "builds" / good[:16] / "c-proftpd" / "proftpd")
    assert build["cflags"] == CFLAGS and build["obtained"].startswith(f"built from {repo} at {good}")
    # every one of the 300 sessions logged in: no error samples, the phase's own figure
    with Session(engine) as s:
        samples = {(m, st): v for m, st, v in s.execute(
            select(Sample.metric, Sample.stat, Sample.value).join(Cell).where(Cell.campaign_id == cid))}
    assert not [k for k in samples if k[0] == "errors" and samples[k] > 0], samples
    assert 0 < samples[("elapsed", "value")] < 120
    # the binary is proftpd 1.3.8 with the modules the lab's config needs, its symbols kept
    binary = Path(build["binary"])
    assert "ProFTPD Version 1.3.8" in subprocess.run([binary, "-v"], capture_output=True, text=True).stdout
    mods = subprocess.run([binary, "-l"], capture_output=True, text=True).stdout
    assert {"mod_auth_file.c", "mod_delay.c", "mod_xfer.c", "mod_tls.c"} <= set(mods.split())
    assert {".symtab", ".debug_info"} <= _sections(binary)
    # a second campaign: the cache, not a second build
    t1 = time.monotonic()
    _cid2, status2, error2, build2 = _campaign(engine, repo, "main", login)
    second_s = time.monotonic() - t1
    assert status2 == "done", error2
    assert build2 is not None and build2["source"]["commit"] == good and build2["binary"] == build["binary"]
    assert build2["build_seconds"] == build["build_seconds"] > 10  # the recorded build, not a new one
    t2 = time.monotonic()
    cached = build_c_server("proftpd", ServerRequest("proftpd", source=str(repo), ref=good), lambda _m: None)
    hit_s = time.monotonic() - t2
    assert not cached.built and hit_s < 5, hit_s
    assert second_s < first_s - build["build_seconds"] / 2, (first_s, second_s, build["build_seconds"])
    print(f"proftpd build {build['build_seconds']} s; first campaign {first_s:.1f} s, second {second_s:.1f} s, "
          f"cache lookup {hit_s:.2f} s")
    # a commit that breaks the compile: a failed cell with the compiler's words
    _cid3, status3, error3, build3 = _campaign(engine, repo, "broken", login)
    assert status3 == "failed" and build3 is None, (status3, build3)
    assert error3 is not None and f"proftpd at {bad[:12]}: make -j" in error3
    # make runs the compiler in src/: the file is named from there
    assert "main.c:1:2: error: #error xferlab test: this commit does not compile" in error3, error3
    print("broken commit's cell error:", *error3.splitlines()[:3], sep="\n  ")


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_a_profiled_proftpd_cell_names_proftpds_own_functions(proftpd_repo, backend, proftpd_data):
    from runner.cell.local import run_local_cell
    from runner.spec.model import parse_spec
    from runner.store.models import Cell
    from tests.runner.cell.test_profile_cell import _needs_perf

    _needs_perf()
    repo, good, _bad = proftpd_repo
    spec = parse_spec({"name": "profile", "repeats": 1, "warmup": True, "backend": "local", "profile": True,
                       "servers": [{"name": "proftpd", "source": str(repo), "ref": good}],
                       "workloads": [{"name": "retr", "params": {"clients": 4, "transfer_size": 16 << 20,
                                                                 "duration": 3.0}}]})
    srv = spec.servers[0]
    cell = Cell(id=1, seq=0, server="proftpd", server_label=srv.display(), server_spec=srv.model_dump(mode="json"),
                workload="retr", params=spec.workloads[0].params.model_dump(mode="json"), params_key="",
                repeat=1, profiled=True)
    out = run_local_cell(cell, spec, backend)
    assert out.status == "done", out.error
    prof = out.profile
    assert prof is not None and prof.profiler == "perf"
    frames = {f.split(" ")[0] for line in prof.on_cpu.splitlines() for f in line.rsplit(" ", 1)[0].split(";")}
    own = sorted(f for f in frames if f.startswith("pr_"))
    # proftpd's own functions by name (its symbols: the build's -g), the data transfer's among them
    assert len(own) >= 3 and any(f.startswith(("pr_data_", "pr_netio_", "pr_fsio_")) for f in own), own
    assert "main" in frames, sorted(frames)[:50]
    print(f"proftpd's own frames in the profile: {len(own)}, e.g. {', '.join(own[:8])}")


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(1500)
@pytest.mark.parametrize("mode", ["explicit", "implicit"])
def test_proftpd_from_source_serves_ftps_with_its_compiled_in_mod_tls(proftpd_repo, proftpd_data, certs, mode):
    from runner.backends.local import LocalBackend
    from runner.catalogue.workloads import WorkloadParams
    from runner.load.ftp.driver import DRIVER

    repo, good, _bad = proftpd_repo
    h = LocalBackend().start(ServerRequest("proftpd", source=str(repo), ref=good, variant={"tls": mode}, tls=certs))
    try:
        assert h.build_info["source"]["commit"] == good and h.build_info["version"] == f"git-{good[:12]}"
        small = dict(duration=0.2, transfer_size=1 << 20, op_timeout=20, connect_timeout=20, phase_timeout=60)
        login = DRIVER.run("login", h.target, WorkloadParams(clients=3, login_mode="sequential", **small))
        assert login.ops == 3 and not login.errors, login.notes
        assert login.tls["protocol"] in ("TLSv1.2", "TLSv1.3") and login.tls["mode"] == mode, login.tls
        r = DRIVER.run("retr", h.target, WorkloadParams(**small))
        assert r.ops >= 1 and not r.errors and r.bytes == r.ops * (1 << 20), (r.errors, r.notes)
    finally:
        h.stop()


@pytest.mark.docker
@pytest.mark.timeout(2400)
def test_proftpd_from_source_in_an_image_tagged_by_the_commit(proftpd_repo, proftpd_data, dbackend, client, certs):
    from runner.catalogue.workloads import WorkloadParams
    from runner.load.ftp.driver import DRIVER

    repo, good, _bad = proftpd_repo
    small = dict(duration=0.2, transfer_size=1 << 20, op_timeout=20, connect_timeout=20, phase_timeout=60)
    for variant in ({}, {"tls": "explicit"}):
        req = ServerRequest("proftpd", source=str(repo), ref=good, variant=variant, tls=certs if variant else None)
        h = start_at_commit(dbackend, client, req, good, f"git-{good[:12]}")
        try:
            login = DRIVER.run("login", h.target, WorkloadParams(clients=3, login_mode="sequential", **small))
            assert login.ops == 3 and not login.errors, login.notes
            r = DRIVER.run("retr", h.target, WorkloadParams(**small))
            assert r.ops >= 1 and not r.errors and r.bytes == r.ops * (1 << 20), (r.errors, r.notes)
            if variant:
                assert login.tls["mode"] == "explicit", login.tls
        finally:
            h.stop()
    # the image's proftpd is the recipe's: mod_tls compiled in, symbols kept
    out = client.containers.run(f"xferlab/proftpd:git-{good[:16]}", remove=True, entrypoint=[
        "sh", "-c", "/usr/sbin/proftpd -l && readelf -S -W /usr/sbin/proftpd"]).decode()
    assert "mod_tls.c" in out.split() and " .debug_info " in out and " .symtab " in out
