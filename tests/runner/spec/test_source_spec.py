"""A server entry's ``source`` and ``ref`` (runner.spec.source): what is accepted, and every
refusal names the field."""
from __future__ import annotations

import pytest

from runner.spec.model import SpecError, parse_spec
from runner.spec.source import check_ref


def _spec(server: dict) -> dict:
    return {"servers": [server], "workloads": [{"name": "retr"}]}


def test_a_checkout_and_a_ref_make_a_source_request(tmp_path):
    spec = parse_spec(_spec({"name": "pyftpdlib", "source": str(tmp_path), "ref": "v2.1.0"}))
    req = spec.servers[0].request(2000)
    assert (req.source, req.ref, req.version) == (str(tmp_path.resolve()), "v2.1.0", None)
    assert req.label == "pyftpdlib @v2.1.0"
    assert req.series_version == "git"  # one history series across commits
    sha = "0123456789abcdef0123456789abcdef01234567"
    full = parse_spec(_spec({"name": "tpd", "source": str(tmp_path), "ref": sha})).servers[0].request(10)
    assert full.label == "tpd @0123456789ab"
    worktree = parse_spec(_spec({"name": "twisted", "source": str(tmp_path)})).servers[0].request(10)
    assert worktree.label == "twisted @worktree" and worktree.ref is None
    assert parse_spec(_spec({"name": "pyftpdlib"})).servers[0].request(10).series_version == ""


@pytest.mark.parametrize("url", ["https://github.com/giampaolo/pyftpdlib.git", "ssh://git@example.org/x/y.git"])
def test_git_urls_of_the_allowed_schemes(url):
    assert parse_spec(_spec({"name": "pyftpdlib", "source": url, "ref": "main"})).servers[0].source == url


@pytest.mark.parametrize(("server", "field", "words"), [
    ({"source": "/no/such/dir"}, "servers.0.source", "not a directory"),
    ({"source": "http://example.org/x.git", "ref": "main"}, "servers.0.source", "scheme 'http' is not allowed"),
    ({"source": "ext::sh -c touch% /tmp/pwned", "ref": "main"}, "servers.0.source", "not a directory"),
    ({"source": "https://example.org/x y.git", "ref": "main"}, "servers.0.source", "characters"),
    ({"source": "https:///x.git", "ref": "main"}, "servers.0.source", "without a host"),
    ({"source": "--upload-pack=touch /tmp/x"}, "servers.0.source", "cannot start with '-'"),
    ({"source": "https://example.org/x.git"}, "servers.0", "needs a 'ref'"),
    ({"ref": "main"}, "servers.0", "'ref' needs a 'source'"),
    ({"source": "TMP", "ref": "--output=/etc/passwd"}, "servers.0.ref", "not a git ref"),
    ({"source": "TMP", "ref": "main..topic"}, "servers.0.ref", "not a git ref"),
    ({"source": "TMP", "ref": "HEAD@{1}"}, "servers.0.ref", "not a git ref"),
    ({"source": "TMP", "ref": "a;rm -rf /"}, "servers.0.ref", "not a git ref"),
    ({"source": "TMP", "ref": "HEAD:README"}, "servers.0.ref", "not a git ref"),
    ({"source": "TMP", "version": "2.2.0"}, "servers.0", "has no 'version'"),
])
def test_refusals_name_the_field(tmp_path, server, field, words):
    entry = {"name": "pyftpdlib", **{k: (str(tmp_path) if v == "TMP" else v) for k, v in server.items()}}
    with pytest.raises(SpecError) as ei:
        parse_spec(_spec(entry))
    assert any(path == field and words in msg for path, msg in ei.value.errors), ei.value.errors


def test_only_the_servers_with_a_source_build_can_have_one(tmp_path):
    with pytest.raises(SpecError) as ei:
        parse_spec(_spec({"name": "nginx", "source": str(tmp_path)}))
    assert ("nginx cannot be built from source here (servers that can: pyftpdlib, twisted, tpd, go-http, netty, "
            "vsftpd, proftpd, pureftpd)" in str(ei.value))
    for c_server in ("vsftpd", "proftpd", "pureftpd"):  # their recipes: runner.backends.local.csrcbuild
        assert parse_spec(_spec({"name": c_server, "source": str(tmp_path)})).servers[0].source == str(tmp_path)


@pytest.mark.parametrize("ref", ["main", "v1.5.10", "release/2.x", "1a2b3c4", "HEAD~2", "HEAD^1", "feature+x"])
def test_refs_accepted(ref):
    assert check_ref(ref) == ref
