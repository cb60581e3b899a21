#!/usr/bin/env bash
# deb_test.sh — issue 13 item 1: `make deb` builds a package that installs
# with dpkg -i on this Debian 12 machine, and the installed binary runs
# `payonce migrate` and `payonce serve` from the packaged configuration, as
# the package's system user (started directly: CI has no systemd). Checks
# the files (unit, man page, conffile, master key), `config check`, the
# man page formats without warnings, /healthz and /readyz answer, SIGTERM
# stops it; then purges the package and what it created. Needs root (it
# installs a package); scripts/test.sh runs it last.
set -uo pipefail
cd "$(dirname "$0")/../.."
[ "$(id -u)" -eq 0 ] || { echo "deb_test: skipped (needs root to install a package)"; exit 0; }
if dpkg-query -W -f='${Status}' payonce 2>/dev/null | grep -q "install ok installed"; then
  echo "deb_test: a payonce package is installed already; not touching it"; exit 1
fi
fails=0; passes=0
check() { if [ "$2" == "$3" ]; then passes=$((passes+1)); else echo "FAIL deb: $1: got '$2', expected '$3'"; fails=$((fails+1)); fi; }
work=$(mktemp -d "${TMPDIR:-/tmp}/payonce-debtest.XXXXXX"); chmod 755 "$work"
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  dpkg -P payonce >/dev/null 2>&1
  rm -rf /var/lib/payonce /etc/payonce "$work"
}
trap cleanup EXIT
deb=$(scripts/deb.sh) || { echo "FAIL deb: the package did not build"; exit 1; }
check "package built" "$(dpkg-deb -f "$deb" Package)" payonce
# issue 45: the archive's root is 0755 (mktemp's 0700 was the package's /);
# Depends names the packages of the binary's own libraries (dpkg-shlibdeps),
# no library of a library (librtmp1, libldap-2.5-0, ...), and adduser and
# cracklib-runtime, which it needs without linking them
check "archive root 0755" "$(dpkg-deb -c "$deb" 2>/dev/null | awk '$6 == "./" {print $1}')" drwxr-xr-x
deps=$(dpkg-deb -f "$deb" Depends | tr ',' '\n' | sed 's/^ *//; s/ .*//')
check "Depends: adduser, cracklib-runtime" "$(printf '%s\n' "$deps" | grep -cx 'adduser\|cracklib-runtime')" 2
needed=$(dpkg-deb --fsys-tarfile "$deb" | tar -xO ./usr/bin/payonce > "$work/payonce.bin" && objdump -p "$work/payonce.bin" | awk '/NEEDED/ {print $2}')
indirect=
for p in $deps; do
  [ "$p" = adduser ] || [ "$p" = cracklib-runtime ] && continue
  dpkg -L "$p" 2>/dev/null | sed 's#.*/##' | grep -qxF -f <(printf '%s\n' $needed) || indirect="$indirect $p"
done
check "Depends: only the binary's own libraries (not:$indirect)" "$indirect" ""
check "Depends: every library the binary links" "$(printf '%s\n' $needed | while read -r l; do dpkg -S "*/$l" 2>/dev/null | cut -d: -f1 | head -1; done | sort -u | grep -cvxF -f <(printf '%s\n' $deps))" 0
dpkg -i "$deb" > "$work/install.log" 2>&1; rc=$?
check "dpkg -i" "$rc" 0; [ "$rc" -eq 0 ] || cat "$work/install.log"
check "binary" "$(/usr/bin/payonce --version | cut -d' ' -f1)" payonce
check "unit" "$(test -f /lib/systemd/system/payonce.service && echo yes)" yes
check "unit hardening" "$(grep -c '^NoNewPrivileges=yes\|^ProtectSystem=strict\|^StateDirectory=payonce\|^User=payonce' /lib/systemd/system/payonce.service)" 4
# issue 27: the directives systemd-analyze security still flagged
unit=/lib/systemd/system/payonce.service
for d in '^IPAddressDeny=link-local multicast$' '^ProtectProc=invisible$' '^ProcSubset=pid$' '^RemoveIPC=yes$' \
         '^PrivateUsers=yes$' '^SystemCallFilter=~@privileged @resources$' '^SystemCallErrorNumber=EPERM$'; do
  check "unit: $d" "$(grep -c "$d" "$unit")" 1
done
if command -v systemd-analyze >/dev/null; then  # offline: no running systemd needed
  exposure=$(systemd-analyze security --offline=true "$unit" 2>/dev/null | sed -n 's/.*Overall exposure level for .*: \([0-9.]*\).*/\1/p')
  check "systemd-analyze security: exposure ${exposure:-?} below 1.5 (1.8 before issue 27)" "$(python3 -c "print(float('${exposure:-10}') < 1.5)")" True
fi
check "man page" "$(test -f /usr/share/man/man1/payonce.1.gz && echo yes)" yes
check "man page formats cleanly" "$(zcat /usr/share/man/man1/payonce.1.gz | groff -man -Tutf8 -ww -z 2>&1 | wc -l)" 0
check "conffile" "$(dpkg-query -W -f='${Conffiles}' payonce | grep -c /etc/payonce/payonce.conf)" 1
check "system user" "$(getent passwd payonce | cut -d: -f7)" /usr/sbin/nologin
check "master key created once, 32 bytes, 0640 root:payonce" "$(stat -c '%s %a %U:%G' /etc/payonce/master.key)" "32 640 root:payonce"
if command -v systemd-analyze >/dev/null && [ -d /run/systemd/system ]; then
  check "systemd-analyze verify" "$(systemd-analyze verify /lib/systemd/system/payonce.service 2>&1 | wc -l)" 0
fi
as() { setpriv --reuid payonce --regid payonce --init-groups -- "$@"; }  # exec, no parent in between: signals reach serve
as /usr/bin/payonce config check --config /etc/payonce/payonce.conf > "$work/check.out" 2>&1
check "config check of the packaged config" "$?" 0
as /usr/bin/payonce migrate --config /etc/payonce/payonce.conf > "$work/migrate.out" 2>&1
check "migrate (as payonce, the packaged config's database)" "$?" 0
check "the database is in the state directory" "$(stat -c %U /var/lib/payonce/payonce.db 2>/dev/null)" payonce
check "the database is readable by its owner only" "$(stat -c %a /var/lib/payonce/payonce.db 2>/dev/null)" 600
# serve as the unit would, ports overridden (the packaged 8080/9100 may be taken here)
# (setpriv itself in the background, not the function: $! must be serve)
setpriv --reuid payonce --regid payonce --init-groups -- /usr/bin/payonce serve \
  --config /etc/payonce/payonce.conf --listen 127.0.0.1:0 --ops-listen 127.0.0.1:0 \
  > "$work/serve.out" 2> "$work/serve.err" &
pid=$!
for _ in $(seq 1 100); do grep -q "operations on port" "$work/serve.out" && break; sleep 0.05; done
port=$(sed -n 's/^listening on port //p' "$work/serve.out")
ops=$(sed -n 's/^operations on port //p' "$work/serve.out")
check "serve started" "$([ -n "$port" ] && [ -n "$ops" ] && echo yes)" yes
check "/healthz" "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$ops/healthz")" 200
check "/readyz" "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$ops/readyz")" 200
check "a callback for an unknown tenant is refused" "$(curl -s -o /dev/null -w '%{http_code}' -X POST -d '{}' "http://127.0.0.1:$port/notify/stripe/nobody")" 404
kill -TERM "$pid"; wait "$pid"; rc=$?; pid=
check "SIGTERM: exits 0" "$rc" 0
check "no payonce process left" "$(pgrep -fc '^/usr/bin/payonce serve')" 0
check "serve logged JSON lines" "$(head -c1 "$work/serve.err")" "{"
[ "$fails" -eq 0 ] || { echo "--- serve.err"; tail -n 20 "$work/serve.err"; }
echo "# deb: $passes checks passed, $fails failed ($(basename "$deb"))"
[ "$fails" -eq 0 ]
