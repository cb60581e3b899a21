/*
 * limits.h — every bound payonce puts on outside input and on its own
 * queues, in one place (TigerBeetle's habit: a limit on everything).
 *
 * A request, file or row that exceeds one of these is refused with a clear
 * error (PO_ERR_LIMIT, HTTP 413/431, a usage message); it never truncates
 * silently and never crashes. Units are in the name: _MAX a count, or a
 * text's length without its NUL (its buffer is [X_MAX + 1]); _SIZE a
 * buffer's size in bytes, NUL included (the text is at most X_SIZE - 1);
 * _MS milliseconds, _S seconds.
 */
#ifndef PO_LIMITS_H
#define PO_LIMITS_H

#include <stdint.h>

/* ---- identifiers and text ---- */
#define PO_ID_MAX 64               /* tenant, merchant, out_trade_no, refund no, receiver */
#define PO_TXN_ID_MAX 64           /* channel transaction / refund / share ids */
#define PO_CHANNEL_SIZE 16         /* a channel's name */
#define PO_CHANNELS_MAX 16         /* registered channels (checked when registry.c compiles) */
#define PO_KEY_SIZE 256            /* derived idempotency key */
#define PO_NAME_MAX 128            /* tenant display name */
#define PO_TIME_SIZE 40            /* RFC 3339 timestamp text */
#define PO_REASON_SIZE 64          /* outcome reason code */
#define PO_ERRBUF_SIZE 256         /* caller-supplied error detail buffers */
#define PO_SERIAL_MAX 64           /* certificate serial (hex) or PUB_KEY_ID_… */
#define PO_ALIPAY_ROOT_SN_MAX 160  /* alipay_root_cert_sn: RSA roots' SNs, "_" between */
#define PO_ACCOUNT_SIZE 96         /* ledger account name */
#define PO_DETAIL_SIZE 256         /* alert detail text */
#define PO_JSON_DEPTH_MAX 64       /* nesting of JSON from outside (objects and arrays) */
#define PO_EVENT_ID_SIZE 40        /* an outbox event id "evt_" + 32 hex */
#define PO_OUTBOX_PAYLOAD_MAX 2048 /* one event's data.object, JSON text */
#define PO_URL_MAX 512             /* a webhook endpoint's URL */
#define PO_WEBHOOK_SECRET_SIZE 80  /* "whsec_" + 64 hex */

/* ---- tenant webhooks and what a tenant may make payonce connect to ---- */
#define PO_EGRESS_ALLOW_MAX 16           /* networks in the operator's egress allow-list */
#define PO_WEBHOOK_ENDPOINTS_MAX 16      /* live endpoints of one tenant (Stripe's limit too) */
#define PO_WEBHOOK_PENDING_DEFAULT 10000 /* a tenant's pending deliveries before fan-out waits */

/* ---- money ---- */
#define PO_AMOUNT_MAX INT64_C(100000000000000) /* 10^14 minor units: 1 trillion yuan */

/* ---- files ---- */
#define PO_EVENT_FILE_MAX (64 * 1024)          /* `apply --event` input */
#define PO_KEY_FILE_MAX (64 * 1024)            /* keys, certificates, secrets given to the CLI */
#define PO_BILL_MAX (64 * 1024 * 1024)         /* bill file bytes */
#define PO_ORDER_IMPORT_MAX (16 * 1024 * 1024) /* `order import` input bytes */
#define PO_ORDER_IMPORT_ROWS_MAX 10000         /* orders in one `order import` (one transaction) */
#define PO_ORDER_IMPORT_LINE_MAX 512           /* bytes of one of its lines */
#define PO_BILL_ROWS_MAX 1000000               /* rows in one bill */
#define PO_BILL_FIELDS_MAX 40                  /* columns in one bill row */
#define PO_BILL_LINE_MAX 8192                  /* bytes in one line of a bill's text */

/* ---- the engine and the store ---- */
#define PO_BATCH_MAX 256          /* events in one engine transaction */
#define PO_ROWS_MAX 100000        /* rows one query may return */
#define PO_CELL_MAX (1024 * 1024) /* bytes in one result cell */
#define PO_COLS_MAX 64            /* columns in one result row */
#define PO_SQL_PARAMS_MAX 16      /* bound parameters of one statement */
#define PO_ROWSET_COLS_MAX 16     /* columns of a row set parameter */
#define PO_ROWSET_ROWS_MAX (PO_BATCH_MAX * PO_LEDGER_LINES_MAX) /* its rows */
#define PO_ROWSET_NAME_MAX 32                                   /* its alias and column names */
#define PO_STMT_CACHE_MAX 256       /* prepared statements kept per connection */
#define PO_COMMITTER_WORKERS_MAX 16 /* committer threads (connections) */
#define PO_BATCH_WAIT_US_MAX 100000 /* the longest a busy committer waits to fill a batch */
#define PO_ACCOUNT_CACHE_MAX 100000 /* channel accounts held in memory */
#define PO_ACCOUNT_SWEEP_S 30       /* changed accounts leave the cache within this */
#define PO_WORKERS_MAX 256          /* threads for blocking work (API, account loads) */
#define PO_WORKERS_DEFAULT 64       /* serve --workers; a node's maxconn behind HAProxy */
#define PO_QUEUE_MAX 65536          /* items queued for one committer worker */
#define PO_KNOWN_MAX (1 << 21)      /* committed events remembered (~40 bytes each) */
#define PO_POOL_SIZE_MAX 64         /* connections in one pool */
#define PO_LEDGER_LINES_MAX 4       /* lines of one journal */
#define PO_LEDGER_DELTAS_MAX (PO_BATCH_MAX * PO_LEDGER_LINES_MAX)
/* Waiting for a lock, the SQLite writer or a pool connection stays below
 * the channels' 5 s ack deadline: the callback is answered FAIL (5xx) in
 * time and the channel's retry is deduplicated. */
#define PO_LOCK_WAIT_MS 3000
#define PO_POOL_WAIT_MS 2000
/* PostgreSQL connections: connecting, unacknowledged data on a silent
 * path, and (gateway connections) one statement, each bounded. */
#define PO_PG_CONNECT_TIMEOUT_S 3
#define PO_PG_TCP_USER_TIMEOUT_MS 3000
#define PO_PG_STATEMENT_TIMEOUT_MS 3000
/* A slice of the continuous ledger check (PostgreSQL): longer is cancelled. */
#define PO_LEDGER_SLICE_TIMEOUT_MS 10000
#define PO_PG_CLIENT_WAIT_MS 5000 /* a gateway connection's wait for any answer */
/* Plain integers: each is also spelled as text with PO_STR (core.h). */

/* ---- channels ---- */
#define PO_BODY_MAX (64 * 1024) /* callback and API request body bytes */
/* request line and headers per connection: libmicrohttpd's memory pool of
 * a connection, which an idle keep-alive connection holds whole once it
 * has served a request (measured, `payonce bench --only idlemem`: 32 KiB
 * made 10,000 such connections 347 MB, 8 KiB 101 MB); about 7.4 KB of
 * headers fit, like nginx's and Apache's 8 KB */
#define PO_HEADER_MEMORY_MAX (8 * 1024)
#define PO_HEADER_VALUE_MAX 512            /* one signature-related header value */
#define PO_SIG_HEADER_MAX 2048             /* Stripe-Signature */
#define PO_CHANNEL_KEYS_MAX 8              /* verification keys per tenant (rotation) */
#define PO_WEBHOOK_SECRETS_MAX 4           /* Stripe-style secrets per tenant (rotation) */
#define PO_SIGNATURES_MAX 8                /* v1= signatures in one Stripe-Signature */
#define PO_SECRET_MAX 128                  /* one webhook secret */
#define PO_ORDER_EXPIRY_MAX_S (90 * 86400) /* an order's time_expire, at most this ahead */
#define PO_FORM_PARAMS_MAX 64              /* Alipay form fields */
#define PO_WINDOW_DEFAULT_S 300            /* timestamp tolerance */
/* A channel API's answer, read up to a bound its API fits with room: one
 * object (a WeChat Pay order, an Alipay response, a Stripe PaymentIntent
 * with every attribute: a few KB), and a list page or a search (Stripe's
 * 100 events of ~10 KB each, balance transactions with their expanded
 * sources: about 1 MB). Bills are downloads with their own bound. */
#define PO_API_RESP_MAX (1024 * 1024)
#define PO_API_LIST_MAX (8 * 1024 * 1024)
#define PO_API_TIMEOUT_S 10 /* a channel API call, in all */
#define PO_API_CONNECT_TIMEOUT_S 5
/* Per-tenant shares (bulkheads): refund submissions with a channel's API at
 * once, per tenant and in all; callbacks in flight per tenant. A share
 * binds only while another tenant is active: holds a slot, or asked within
 * PO_BULKHEAD_RECENT_MS (a lone tenant may use the whole gateway). */
#define PO_BULKHEAD_RECENT_MS 1000
#define PO_OUTBOUND_PER_TENANT 2
#define PO_OUTBOUND_MAX 16
#define PO_CALLBACKS_PER_TENANT 1024
/* A tenant's contended share of the API workers by default: this many per
 * committer thread (8 on PostgreSQL's default 2, 4 on SQLite's 1), at most
 * half of the workers (--api-per-tenant sets it). */
#define PO_API_SHARE_PER_COMMITTER 4
#define PO_LANE_QUEUE_MAX 1024 /* jobs of one tenant waiting for a worker */
/* libmicrohttpd messages logged per second at most (the rest counted) */
#define PO_HTTP_LIB_LOG_PER_S 5

/* ---- the tenant API ---- */
#define PO_APIKEY_ID_LEN 16
#define PO_APIKEY_LEN (3 + PO_APIKEY_ID_LEN + 1 + 64) /* po_<key_id>_<secret> */
#define PO_IDEM_KEY_MAX 255                           /* Idempotency-Key header */
#define PO_IDEM_TOKEN_LEN 32
#define PO_IDEM_LOCK_S 60  /* a 'running' record older than this is abandoned */
#define PO_IDEM_POLL_MS 20 /* polling an in-flight twin */
#define PO_IDEM_RETENTION_DEFAULT_S (7 * 86400)
/* the shortest retention serve and `idempotency reap` take: a client's retry
 * of a request it sent a moment ago must still find its answer */
#define PO_IDEM_RETENTION_MIN_S 60
#define PO_PAGE_DEFAULT 20 /* list pages */
#define PO_PAGE_MAX 100

/* ---- the operator's console (service/console/console.h) ---- */
#define PO_CONSOLE_PAGE_MAX 100 /* items of one list or search page */
/* tenants one request looks through (the lists kept per tenant) */
#define PO_CONSOLE_TENANTS_WALK 200
#define PO_CONSOLE_SCAN_MAX 2000   /* rows one substring search reads a request */
#define PO_CONSOLE_COUNT_MAX 10000 /* a list's count stops here (shown as "10000+") */
#define PO_CONSOLE_CURSOR_SIZE 320 /* a page's cursor: at most 4 parts, each an id or a time */

/* ---- the command line and the simulator ---- */
#define PO_OPTS_MAX 96             /* options of one command (sim pay takes 64 --order) */
#define PO_SIM_ORDERS_ARGV_MAX 64  /* sim pay --order, on the command line */
#define PO_SIM_ORDERS_MAX 10000    /* sim pay's orders, --orders-file included */
#define PO_SIM_ORDERS_LINE_MAX 128 /* one NO:AMOUNT line of --orders-file */
#define PO_SIM_COPIES_MAX 16
#define PO_SIM_HEADERS_MAX 8
#define PO_SIM_BILL_MAX (8 * 1024 * 1024)

#endif
