#!/usr/bin/env bash
# deps.sh — installs the Debian packages payonce needs, only when missing.
# Build: compiler, CMake, pkg-config and the libraries of docs/internals.md, "Modules".
# Test: cmocka, a PostgreSQL 15 server, clang (libFuzzer) and the runtime
# for sanitizers, clang-format (scripts/lint.sh checks the house format),
# groff (the man page must format cleanly), adduser (the package's
# system user), Chromium (the dashboard's browser test) and, for the
# cluster (scripts/cluster.sh, docs/scaling.md), etcd, Patroni, HAProxy and
# PgBouncer, and Prometheus for promtool (the alert rules' test; its server is
# neither started nor enabled by this install). Runs apt-get as root; as
# another user it names what to install.
#   scripts/deps.sh         everything (make test, make soak, make bench)
#   scripts/deps.sh build   only what `make build` and `make demo` need: the
#                           compiler, CMake and the libraries (a fresh
#                           machine's demo does not wait for Chromium,
#                           PostgreSQL, clang or the cluster's packages)
set -euo pipefail
pkgs=(build-essential cmake pkg-config libsqlite3-dev libpq-dev libssl-dev libjansson-dev
      libcmocka-dev libmicrohttpd-dev libcurl4-openssl-dev zlib1g-dev libzip-dev libcrack2-dev
      cracklib-runtime python3 curl)
if [ "${1:-}" != build ]; then
  pkgs+=(postgresql-15 clang libclang-rt-14-dev clang-format util-linux groff-base adduser chromium
         etcd-server patroni python3-etcd haproxy pgbouncer prometheus)
  # The dashboard's browser test runs playwright-core (npm) with the machine's
  # Node.js (20 or later); Debian's nodejs and npm only when there is none.
  command -v node >/dev/null && command -v npm >/dev/null || pkgs+=(nodejs npm)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "payonce: missing Debian packages: ${missing[*]}" >&2
  echo "payonce: run as root, or: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "payonce: installing ${#missing[@]} Debian packages (apt-get; a few minutes on a fresh machine): ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# Packages that come with a server (prometheus, etcd, haproxy, pgbouncer,
# postgresql) are installed for their tools and for the tests, which start
# their own instances: no daemon is started by the install.
norc=""
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d && norc=1
fi
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null || { [ -n "$norc" ] && rm -f /usr/sbin/policy-rc.d; exit 1; }
[ -n "$norc" ] && rm -f /usr/sbin/policy-rc.d
if printf '%s\n' "${missing[@]}" | grep -qx prometheus && command -v systemctl >/dev/null; then
  systemctl disable prometheus >/dev/null 2>&1 || true
fi
exit 0
