#!/usr/bin/env bash
# deb.sh — `make deb`: a Debian 12 package of the release build, made with
# dpkg-deb from a staged tree (no debhelper): /usr/bin/payonce, the man
# page (scripts/manpage.sh), the systemd unit (contrib/payonce.service),
# the default configuration as a conffile, the docs. Depends: what
# dpkg-shlibdeps says the binary's own libraries (its DT_NEEDED, not theirs)
# need, and adduser and cracklib-runtime (the password policy's dictionary,
# read at run time, linked by nobody). The archive's root is 0755.
# The maintainer scripts create the system user `payonce` and, once, the
# master key /etc/payonce/master.key (0640 root:payonce). Prints the path.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/payonce
[ -x "$bin" ] || { echo "deb: $bin not built (make build)" >&2; exit 1; }
ver=$("$bin" --version | awk '{print $2}')
arch=$(dpkg --print-architecture)
# debian/control (empty) and debian/payonce/: where dpkg-shlibdeps expects a
# package's staged tree
work=$(mktemp -d "${TMPDIR:-/tmp}/payonce-deb.XXXXXX")
trap 'rm -rf "$work"' EXIT
stage=$work/debian/payonce
mkdir -p "$stage" && : > "$work/debian/control"
chmod 0755 "$stage"  # the archive's root: mktemp's 0700 would become the package's /
install -D -m 0755 "$bin" "$stage/usr/bin/payonce"
strip --strip-unneeded "$stage/usr/bin/payonce"
scripts/manpage.sh "$bin" "$stage/payonce.1"
install -D -m 0644 "$stage/payonce.1" "$stage/usr/share/man/man1/payonce.1"
rm "$stage/payonce.1"
gzip -9n "$stage/usr/share/man/man1/payonce.1"
install -D -m 0644 contrib/payonce.service "$stage/lib/systemd/system/payonce.service"
install -D -m 0640 contrib/payonce.conf "$stage/etc/payonce/payonce.conf"
doc="$stage/usr/share/doc/payonce"
install -D -m 0644 README.md "$doc/README.md"
for f in docs/*.md docs/openapi.json; do install -D -m 0644 "$f" "$doc/$(basename "$f")"; done
printf 'payonce\n\nCopyright: the payonce authors.\n' > "$doc/copyright"
# Depends: the binary's direct libraries' packages with the versions their
# symbols need (dpkg-shlibdeps), and the two it needs without linking them
deps=$(cd "$work" && dpkg-shlibdeps -O -e debian/payonce/usr/bin/payonce 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
[ -n "$deps" ] || { echo "deb: dpkg-shlibdeps found no libraries" >&2; exit 1; }
mkdir -p "$stage/DEBIAN"
cat > "$stage/DEBIAN/control" <<CTRL
Package: payonce
Version: $ver
Architecture: $arch
Maintainer: payonce <payonce@localhost>
Depends: $deps, adduser, cracklib-runtime
Section: net
Priority: optional
Installed-Size: $(du -sk "$stage/usr" | cut -f1)
Description: payment-callback gateway and ledger: each callback credited once
 payonce receives payment channels' callbacks (WeChat Pay, Alipay,
 Stripe-style webhooks), verifies them and credits each payment exactly
 once, under concurrency, crashes and replays, in a double-entry ledger.
CTRL
echo /etc/payonce/payonce.conf > "$stage/DEBIAN/conffiles"
cat > "$stage/DEBIAN/postinst" <<'SH'
#!/bin/sh
set -e
if [ "$1" = configure ]; then
  getent group payonce >/dev/null || addgroup --system payonce
  getent passwd payonce >/dev/null || adduser --system --ingroup payonce --no-create-home \
    --home /var/lib/payonce --shell /usr/sbin/nologin payonce
  install -d -m 0750 -o payonce -g payonce /var/lib/payonce
  chgrp payonce /etc/payonce/payonce.conf
  if [ ! -e /etc/payonce/master.key ]; then
    umask 027
    head -c 32 /dev/urandom > /etc/payonce/master.key
    chgrp payonce /etc/payonce/master.key
    chmod 0640 /etc/payonce/master.key
    echo "payonce: created /etc/payonce/master.key (back it up apart from the database)"
  fi
  if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null || true
    echo "payonce: systemctl enable --now payonce to start it"
  fi
fi
SH
cat > "$stage/DEBIAN/postrm" <<'SH'
#!/bin/sh
set -e
if [ "$1" = purge ]; then
  # the master key is kept: without it the sealed secrets of a kept database are lost
  rm -f /etc/payonce/payonce.conf
  [ -d /run/systemd/system ] && systemctl daemon-reload >/dev/null || true
fi
SH
chmod 0755 "$stage/DEBIAN" "$stage/DEBIAN/postinst" "$stage/DEBIAN/postrm"
out=build/payonce_${ver}_${arch}.deb
dpkg-deb --root-owner-group --build "$stage" "$out" >/dev/null
echo "$out"
