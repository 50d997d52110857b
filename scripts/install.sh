#!/usr/bin/env bash
# Install everything xferlab needs on a fresh Debian/Ubuntu machine:
#   - the Debian packages listed in scripts/apt-packages.txt (when root and apt-get exist),
#   - the unprivileged user the client tools (lftp, wget, curl, wrk, h2load) run as when
#     the runner is root: XFERLAB_CLIENT_USER, default xferlab-client (when root),
#   - a virtualenv in .venv with xferlab and its test dependencies,
#   - inferno (the flame graph tools: inferno-flamegraph, inferno-diff-folded, inferno-collapse-perf),
#     built from crates.io with cargo into .venv/bin (runner/report/flamegraph.py).
# Idempotent: a second run only checks. Uses the package tools' default mirrors.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
pkgs=$(grep -v '^\s*#' scripts/apt-packages.txt | sed 's/#.*//' | xargs || true)
missing=""
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "install.sh: installing Debian packages:$missing"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends $missing >/dev/null
    else
        echo "install.sh: please install these Debian packages (as root):$missing" >&2
        echo "  apt-get install$missing" >&2
    fi
fi

# The client tools never run as root: a root runner drops to this user in each client
# (runner/load/tools/labuser.py). A system user: no home, no login shell, no password.
client_user=${XFERLAB_CLIENT_USER:-xferlab-client}
if ! printf '%s' "$client_user" | grep -Eq '^[a-z_][a-z0-9_-]{0,30}$'; then
    echo "install.sh: XFERLAB_CLIENT_USER=$client_user is not a user name ([a-z_][a-z0-9_-]*, at most 31)" >&2
    exit 2
fi
if ! id -u "$client_user" >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then
        echo "install.sh: creating the client user $client_user"
        useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin \
            "$client_user"
    else
        echo "install.sh: as root, create the client user the client tools run as (XFERLAB_CLIENT_USER):" >&2
        echo "  useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin $client_user" >&2
    fi
fi

if [ ! -x .venv/bin/python ]; then
    echo "install.sh: creating .venv with $($PY --version)"
    $PY -m venv .venv
fi
stamp=.venv/.xferlab-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    echo "install.sh: installing xferlab into .venv"
    .venv/bin/python -m pip install -q -U pip
    .venv/bin/python -m pip install -q -e '.[test]'
    touch "$stamp"
fi

# inferno: the flame graphs of profiled cells (runner/report/flamegraph.py). Pinned; the build
# from source took 3 min 40 s with one job on a busy 2-core machine (1 min 5 s of CPU); later
# runs only check cargo's record of what it installed (.venv/.crates.toml).
INFERNO_VERSION=0.12.8
if ! { [ -x .venv/bin/inferno-flamegraph ] && [ -x .venv/bin/inferno-diff-folded ] &&
       grep -q "^\"inferno $INFERNO_VERSION " .venv/.crates.toml 2>/dev/null; }; then
    if command -v cargo >/dev/null; then
        echo "install.sh: building inferno $INFERNO_VERSION into .venv/bin (cargo install; a few minutes)"
        cargo install --quiet inferno --locked --version "$INFERNO_VERSION" --root .venv
    else
        echo "install.sh: flame graphs need inferno $INFERNO_VERSION: install Rust's cargo, then run" >&2
        echo "  cargo install inferno --locked --version $INFERNO_VERSION --root .venv" >&2
    fi
fi
# proftpd's upstream source (Debian's proftpd-dfsg .orig.tar.gz, about 19 MB) in the cache: the
# tree the C server build recipe's test builds (tests/runner/backends/test_c_source_build.py).
# apt-get source --download-only under a private apt config made from this machine's own
# /etc/apt/sources.list.d/debian.sources (runner/backends/local/debsrc.py); fetched once.
if command -v apt-get >/dev/null && [ -r /etc/apt/sources.list.d/debian.sources ]; then
    .venv/bin/python -m runner.backends.local.debsrc proftpd-dfsg >/dev/null \
        || echo "install.sh: could not fetch proftpd's source (the C source build test will skip)" >&2
fi
echo "install.sh: ready: .venv/bin/xferlab"
