#!/usr/bin/env bash
# manpage.sh PAYONCE OUT [DOCDIR] — payonce(1), made from the binary's own help (the
# command table and its option descriptions, src/cli/help.c) and serve's
# configuration (`payonce config doc`), so the manual cannot drift from
# what the binary accepts. `make install` and `make deb` install it. The
# help's references to the sources' docs/*.md and README.md name the
# installed copies in DOCDIR (default /usr/share/doc/payonce, the package's).
set -euo pipefail
bin=${1:?payonce binary}; out=${2:?output file}; docdir=${3:-/usr/share/doc/payonce}
ver=$("$bin" --version | awk '{print $2}')
esc() {
  sed -e "s#\\bdocs/\\([a-z]*\\.md\\)#$docdir/\\1#g" -e "s#\\bREADME\\.md#$docdir/README.md#g" |
    iconv -f utf-8 -t ascii//TRANSLIT | sed -e 's/\\/\\e/g' -e 's/^\./\\\&./' -e "s/^'/\\\\\\&'/"
}
{
  printf '.TH PAYONCE 1 "" "payonce %s" "User Commands"\n' "$ver"
  printf '.SH NAME\npayonce \\- payment-callback gateway and ledger: each callback credited once\n'
  printf '.SH SYNOPSIS\n.B payonce\n.I COMMAND\n[options]\n'
  printf '.SH DESCRIPTION\n'
  printf 'payonce receives payment channels'"'"' callbacks (WeChat Pay, Alipay, Stripe-style webhooks), verifies them, and credits each payment exactly once, under concurrency, crashes and replays, in a double-entry ledger; it serves a tenant API, reconciles bills and pushes signed tenant events.\n'
  printf '.SH COMMANDS\n'
  "$bin" help | sed -n 's/^  \([a-z][a-z -]*[a-z]\)  \+\(.*\)$/\1\t\2/p' | while IFS=$'\t' read -r name summary; do
    printf '.SS %s\n' "$(printf '%s' "$name" | esc)"
    printf '%s\n.PP\n.nf\n' "$(printf '%s' "$summary" | esc)"
    # shellcheck disable=SC2086
    "$bin" $name --help | sed '1,2d' | esc
    printf '.fi\n'
  done
  printf '.SH CONFIGURATION\n.nf\n'
  "$bin" config doc | sed '1,/^| option/d' | sed '/^|---/d' | esc
  printf '.fi\n'
  printf '.SH FILES\n.TP\n.I /etc/payonce/payonce.conf\nthe service'"'"'s configuration (see CONFIGURATION), read when it exists and can be read and neither --config nor PAYONCE_CONFIG names another: serve reads all of it, every other command what applies to it (its --help says what); --verbose says which file, database and master key a command uses.\n'
  printf '.TP\n.I /etc/payonce/master.key\nthe master key that seals channel secrets (the package creates it once, 0640 root:payonce).\n'
  printf '.TP\n.I /var/lib/payonce/payonce.db\nthe packaged default database (SQLite).\n'
  printf '.SH ENVIRONMENT\n.TP\n.B PAYONCE_CONFIG\nthe config file when --config is not given.\n.TP\n.B PAYONCE_DB\nthe database when --db is not given (over the config file'"'"'s).\n.TP\n.B PAYONCE_MASTER_KEY_FILE\nthe master key when --master-key-file is not given (over the config file'"'"'s).\n'
  printf '.SH EXIT STATUS\n0 success; 1 failure; 2 usage; 3 verify found a broken invariant; 75 apply: transient failure, run it again.\n'
  printf '.SH SEE ALSO\n%s/README.md, and beside it operations.md, configuration.md, api.md, webhooks.md, simulator.md, reconciliation.md.\n' "$docdir"
} > "$out"
