/*
 * cmd_backup.c — `payonce backup` and `payonce restore` (docs/operations.md,
 * "Backup and restore").
 *
 *   payonce backup  [--db sqlite:PATH] --to FILE     a copy of the live database
 *   payonce restore --from FILE --db sqlite:NEW      a backup as a new database
 *
 * SQLite only: the copy is SQLite's online backup API (the store's
 * po_store_sqlite_copy), taken while serve runs. Each side is then opened as
 * a payonce database and checked — its schema version, `payonce verify` and
 * its callback chains (`audit verify`) — so a backup that cannot be
 * restored is found when it is made, not when it is needed. The copy gets a
 * manifest (service/accounts/manifest.h) MAC'd with the master key; restore
 * recomputes it from the backup and refuses one whose operators, sessions,
 * API keys, webhook endpoints, channel accounts or chain heads differ from
 * what was backed up, whose MAC does not match (or was made under another
 * master key: it says so), or whose chains do not verify. PostgreSQL has
 * its own tools (pg_dump, base backups); the commands say which.
 */
#include "cli_int.h"

#include "../engine/engine.h"
#include "../ledger/ledger.h"
#include "../service/service.h"
#include "../store/store.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The path of a sqlite: URL, or NULL after saying what PostgreSQL uses. */
static const char *sqlite_path(const char *url, const char *verb)
{
    if (strncmp(url, "sqlite:", 7) == 0 && url[7])
        return url + 7;
    fprintf(stderr,
            "payonce: %s works on the embedded SQLite database; for PostgreSQL use its own"
            " tools: pg_dump -Fc / pg_restore, or a base backup with WAL archiving"
            " (docs/operations.md, 'Backup and restore')\n",
            verb);
    return NULL;
}

/* Opens path as a payonce database and checks it: its schema version (one
 * this build knows) and every ledger invariant. 0, EXIT_VERIFY (violations,
 * said) or EXIT_FAIL. */
static int check_copy(const char *path, int *out_version, int *out_violations)
{
    char url[4200], err[PO_ERRBUF_SIZE] = "";
    struct po_store *s = NULL;
    *out_version = *out_violations = 0;
    if (po_fmt(url, sizeof url, "sqlite:%s", path) || po_store_open(url, &s, err, sizeof err)) {
        fprintf(stderr, "payonce: %s cannot be opened: %s\n", path, err);
        return EXIT_FAIL;
    }
    int ret = 0;
    if (po_store_schema_version(s, out_version) || *out_version == 0) {
        fprintf(stderr, "payonce: %s is not a payonce database (no schema version)\n", path);
        ret = EXIT_FAIL;
    } else if (*out_version > po_store_schema_latest()) {
        fprintf(stderr,
                "payonce: %s has schema version %d, newer than this build's %d: use a newer"
                " payonce\n",
                path, *out_version, po_store_schema_latest());
        ret = EXIT_FAIL;
    } else {
        po_err rc = po_ledger_verify(s, NULL, NULL, out_violations, err, sizeof err);
        if (rc) {
            fprintf(stderr, "payonce: %s: verify could not run: %s\n", path, err);
            ret = EXIT_FAIL;
        } else if (*out_violations) {
            fprintf(stderr,
                    "payonce: %s: %d ledger violation%s (payonce verify --db sqlite:%s names"
                    " them); the copy is kept\n",
                    path, *out_violations, *out_violations == 1 ? "" : "s", path);
            ret = EXIT_VERIFY;
        }
    }
    po_store_close(s);
    return ret;
}

/* The callback chains of s verified with the master key's chain key (NULL:
 * plain); 0, or EXIT_VERIFY after naming the problems. */
static int chains_ok(struct po_store *s, const char *path, const unsigned char *master)
{
    unsigned char key[PO_AUDIT_KEY_LEN];
    if (master)
        po_audit_key(master, key);
    struct po_audit_report *r = malloc(sizeof *r);
    char err[PO_ERRBUF_SIZE] = "", late[PO_TIME_SIZE] = "9999-12-31T00:00:00.000Z";
    po_err rc = r ? po_audit_verify(s, master ? key : NULL, NULL, late, NULL, 0, r, err, sizeof err)
                  : PO_ERR_NOMEM;
    po_secure_zero(key, sizeof key);
    int ret = 0;
    if (rc) {
        fprintf(stderr, "payonce: %s: the callback chains could not be checked: %s\n", path, err);
        ret = EXIT_FAIL;
    } else if (r->broken) {
        for (int i = 0; i < r->nproblems; i++)
            fprintf(stderr, "payonce: %s: callback chain of %s: %s\n", path, r->problem[i].tenant,
                    r->problem[i].what);
        ret = EXIT_VERIFY;
    }
    free(r);
    return ret;
}

/* The callback records serve had not sealed when the copy was taken (it
 * seals every two seconds, so a backup of a gateway taking callbacks
 * nearly always has some), sealed in the copy as serve would have sealed
 * them: the backup is whole, its manifest covers them, and restore goes on
 * refusing a record in no chain (one planted in a backup file). The live
 * database is not touched. A keyed chain and no master key: left as they
 * are (chains_ok then names them). 0, or EXIT_FAIL after saying why. */
static int seal_copy(struct po_store *s, const char *path, const unsigned char *master)
{
    unsigned char key[PO_AUDIT_KEY_LEN];
    if (master)
        po_audit_key(master, key);
    char err[PO_ERRBUF_SIZE] = "";
    int64_t n = 0;
    po_err rc = cli_seal_all(s, master ? key : NULL, &n, err, sizeof err);
    po_secure_zero(key, sizeof key);
    if (rc == PO_ERR_INVALID && !master)
        return 0;
    if (rc) {
        fprintf(stderr,
                "payonce: %s: the callback records not sealed yet could not be sealed: %s\n", path,
                err);
        return EXIT_FAIL;
    }
    return 0;
}

static int report(const struct opts *o, const char *verb, const char *from, const char *to,
                  int64_t bytes, int version, int violations, int ret)
{
    if (cli_flag(o, "json"))
        return cli_print_json(json_pack("{s:b, s:s, s:s, s:I, s:i, s:i}", "ok", ret == 0, "from",
                                        from, "to", to, "bytes", (json_int_t)bytes,
                                        "schema_version", version, "violations", violations))
                   ? EXIT_FAIL
                   : ret;
    if (ret == 0)
        printf("%s: %s -> %s (%lld bytes, schema version %d%s); verify: ok\n", verb, from, to,
               (long long)bytes, version,
               version < po_store_schema_latest() ? ", older than this build's: payonce migrate"
                                                  : "");
    return ret;
}

/* Opens path (a payonce database checked by check_copy) as a store. */
static struct po_store *open_copy(const char *path)
{
    char url[4200], err[PO_ERRBUF_SIZE] = "";
    struct po_store *s = NULL;
    if (po_fmt(url, sizeof url, "sqlite:%s", path) || po_store_open(url, &s, err, sizeof err)) {
        fprintf(stderr, "payonce: %s cannot be opened: %s\n", path, err);
        return NULL;
    }
    return s;
}

/* Copies from to to (the online backup API), checks the copy and says
 * so; a copy that cannot be opened as a payonce database is deleted when
 * drop_bad (a backup nobody could restore). With manifest, the copy gets
 * its manifest, MAC'd with master (NULL: unkeyed, said). */
static int copy_checked(const struct opts *o, const char *verb, const char *from, const char *to,
                        bool drop_bad, bool manifest, const unsigned char *master)
{
    char err[PO_ERRBUF_SIZE] = "";
    int64_t bytes = 0;
    po_err rc = po_store_sqlite_copy(from, to, &bytes, err, sizeof err);
    if (rc)
        return cli_fail(rc, err);
    int version = 0, violations = 0;
    int ret = check_copy(to, &version, &violations);
    if (ret == EXIT_FAIL && drop_bad)
        (void)unlink(to);
    struct po_store *s = ret == EXIT_FAIL ? NULL : open_copy(to);
    if (s && !ret && manifest)
        ret = seal_copy(s, to, master);
    if (s && !ret)
        ret = chains_ok(s, to, master);
    if (s && manifest) {
        char *text = NULL;
        if (version < po_store_schema_latest()) {
            fprintf(stderr,
                    "payonce: %s has schema version %d: run payonce migrate first (a"
                    " manifest needs version %d)\n",
                    from, version, po_store_schema_latest());
            ret = ret ? ret : EXIT_FAIL;
        } else if ((rc = po_manifest_make(s, master, &text, err, sizeof err)) ||
                   (rc = po_manifest_store(s, text, err, sizeof err))) {
            fprintf(stderr, "payonce: %s: its manifest could not be written: %s\n", to, err);
            ret = ret ? ret : EXIT_FAIL;
        } else if (!master) {
            fprintf(stderr, "payonce: no master key: the backup's manifest is not keyed (anyone"
                            " could remake it); restore checks its rows, not who made it\n");
        }
        free(text);
    }
    po_store_close(s);
    return report(o, verb, from, to, bytes, version, violations, ret);
}

/* The backup's manifest against its rows, and who made it; 0 when it
 * matches, else EXIT_VERIFY after naming every difference. */
static int manifest_ok(const char *path, const unsigned char *master)
{
    struct po_store *s = open_copy(path);
    if (!s)
        return EXIT_FAIL;
    char err[PO_ERRBUF_SIZE] = "", *text = NULL;
    struct po_manifest_check *c = calloc(1, sizeof *c);
    po_err rc = c ? po_manifest_load(s, &text, err, sizeof err) : PO_ERR_NOMEM;
    int ret = 0;
    if (!rc && !text) {
        fprintf(stderr,
                "payonce: %s has no manifest: not a backup made by payonce backup (or by one"
                " before manifests: restore it with that version); refused\n",
                path);
        ret = EXIT_VERIFY;
    } else if (!rc) {
        rc = po_manifest_check(s, master, text, c, err, sizeof err);
    }
    if (rc) {
        fprintf(stderr, "payonce: %s: its manifest could not be checked: %s\n", path, err);
        ret = EXIT_VERIFY;
    } else if (!ret) {
        if (c->other_key)
            fprintf(stderr,
                    "payonce: %s was made under another master key (key id %s; this one's"
                    " differs): restore it with that master key\n",
                    path, c->key_id);
        else if (c->unkeyed && master)
            fprintf(stderr,
                    "payonce: %s carries a manifest without a MAC (made without a master key):"
                    " anyone could have made it; refused where a master key exists\n",
                    path);
        else if (!c->mac_ok && !master)
            fprintf(stderr,
                    "payonce: %s: its manifest is keyed: restore needs the master key"
                    " (--master-key-file)\n",
                    path);
        else if (!c->mac_ok)
            fprintf(stderr,
                    "payonce: %s: its manifest does not match its MAC: changed after the"
                    " backup was made\n",
                    path);
        for (int i = 0; i < c->ndiffs; i++)
            fprintf(stderr, "payonce: %s: %s\n", path, c->diff[i]);
        if (c->more)
            fprintf(stderr, "payonce: %s: and %d more differences\n", path, c->more);
        if (!c->mac_ok || c->ndiffs)
            ret = EXIT_VERIFY;
    }
    if (!ret)
        ret = chains_ok(s, path, master);
    free(text);
    free(c);
    po_store_close(s);
    return ret;
}

int cmd_backup(struct po_store *s, const struct opts *o)
{
    (void)s;
    const char *to = cli_need(o, "to"), *path = sqlite_path(cli_db_url(o), "backup");
    if (!to || !path)
        return EXIT_USAGE;
    if (access(path, R_OK) != 0) {
        fprintf(stderr, "payonce: no database at %s to back up\n", path);
        return EXIT_FAIL;
    }
    unsigned char master[PO_MASTER_KEY_LEN];
    bool have = false;
    int ret = cli_load_master_key(o, master, &have);
    if (!ret)
        ret = copy_checked(o, "backup", path, to, true, true, have ? master : NULL);
    po_secure_zero(master, sizeof master);
    return ret;
}

int cmd_restore(struct po_store *s, const struct opts *o)
{
    (void)s;
    const char *from = cli_need(o, "from");
    if (!from)
        return EXIT_USAGE;
    const char *path = sqlite_path(cli_db_url(o), "restore");
    if (!path)
        return EXIT_USAGE;
    if (access(from, R_OK) != 0) {
        fprintf(stderr, "payonce: cannot read %s: no such file\n", from);
        return EXIT_FAIL;
    }
    /* The backup is checked before anything is written: the database, its
     * manifest (who may act, as it was backed up) and its chains. */
    int version = 0, violations = 0;
    int ret = check_copy(from, &version, &violations);
    if (ret == EXIT_FAIL)
        return ret;
    unsigned char master[PO_MASTER_KEY_LEN];
    bool have = false;
    if (!(ret = cli_load_master_key(o, master, &have)) &&
        !(ret = manifest_ok(from, have ? master : NULL)))
        ret = copy_checked(o, "restore", from, path, false, false, have ? master : NULL);
    po_secure_zero(master, sizeof master);
    return ret;
}

/* ---- migrate-store: the embedded database into PostgreSQL ---- */

/* Verify on one side; the count of violations, or -1 when it could not run. */
static int verify_side(struct po_store *s, const char *side)
{
    char err[PO_ERRBUF_SIZE] = "";
    int n = 0;
    if (po_ledger_verify(s, NULL, NULL, &n, err, sizeof err)) {
        fprintf(stderr, "payonce: verify of the %s could not run: %s\n", side, err);
        return -1;
    }
    return n;
}

int cmd_migrate_store(struct po_store *unused, const struct opts *o)
{
    (void)unused;
    const char *from = cli_need(o, "from"), *to = cli_need(o, "to");
    if (!from || !to)
        return EXIT_USAGE;
    if (strncmp(from, "sqlite:", 7) != 0 || !from[7] ||
        (strncmp(to, "postgresql://", 13) != 0 && strncmp(to, "postgres://", 11) != 0)) {
        fprintf(stderr, "payonce: migrate-store moves --from sqlite:PATH --to postgresql://…\n");
        return EXIT_USAGE;
    }
    if (access(from + 7, R_OK) != 0) {
        fprintf(stderr, "payonce: no database at %s\n", from + 7);
        return EXIT_FAIL;
    }
    char err[PO_ERRBUF_SIZE] = "";
    struct po_store *src = NULL, *dst = NULL;
    int applied = 0, ret = 0;
    if (po_store_open(from, &src, err, sizeof err) || po_store_open(to, &dst, err, sizeof err)) {
        fprintf(stderr, "payonce: cannot open database: %s\n", err);
        ret = EXIT_FAIL;
        goto out;
    }
    /* The target gets this build's schema (a new database has none). */
    po_err rc = po_store_migrate(dst, &applied, err, sizeof err);
    struct po_move_report *r = calloc(1, sizeof *r);
    if (!rc && !r)
        rc = PO_ERR_NOMEM;
    if (!rc)
        rc = po_store_move(src, dst, r, err, sizeof err);
    if (rc) {
        free(r);
        ret = cli_fail(rc, err);
        goto out;
    }
    int vs = verify_side(src, "source"), vd = verify_side(dst, "target");
    ret = vs < 0 || vd < 0 ? EXIT_FAIL : vs || vd ? EXIT_VERIFY : 0;
    char shown[600];
    cli_redact_url(to, shown, sizeof shown);
    if (cli_flag(o, "json")) {
        json_t *tables = json_object();
        for (int i = 0; i < r->ntables; i++)
            json_object_set_new(tables, r->table[i].name, json_integer(r->table[i].rows));
        if (cli_print_json(json_pack(
                "{s:b, s:s, s:s, s:I, s:o, s:I, s:i, s:i}", "ok", ret == 0, "from", from, "to",
                shown, "rows", (json_int_t)r->rows, "tables", tables, "written_after",
                (json_int_t)r->written_after, "source_violations", vs, "target_violations", vd)))
            ret = EXIT_FAIL;
    } else {
        for (int i = 0; i < r->ntables; i++)
            if (r->table[i].rows)
                printf("  %-24s %10lld rows\n", r->table[i].name, (long long)r->table[i].rows);
        printf("migrate-store: %s -> %s: %lld rows in %d tables, counted equal on both sides;"
               " verify: source %s, target %s\n",
               from, shown, (long long)r->rows, r->ntables, vs == 0 ? "ok" : "VIOLATIONS",
               vd == 0 ? "ok" : "VIOLATIONS");
    }
    if (r->written_after)
        fprintf(stderr,
                "payonce: %lld rows were written to %s after its snapshot and are not in the"
                " target: stop serve, then move again into a new database\n",
                (long long)r->written_after, from);
    if (!ret && r->written_after)
        ret = EXIT_FAIL;
    free(r);
out:
    po_store_close(src);
    po_store_close(dst);
    return ret;
}
