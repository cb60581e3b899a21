/*
 * admin.c — the operator's dashboard (issue 13 item 11), served by
 * `payonce serve` when it has an admin token (--admin-token-file):
 *
 *   GET  /admin                 the page: HTML, CSS and script in this
 *                               file, nothing fetched from elsewhere
 *                               (Content-Security-Policy says so)
 *   GET  /admin/api/summary     the figures (bearer admin token)
 *   POST /admin/api/alerts/ack  {"tenant","id","note"?}: acknowledge an
 *                               alert, as "dashboard" (bearer admin token)
 *
 * The page reads the summary every 5 s: callbacks of the last hour per
 * channel and outcome (duplicates by layer), ack latency, alerts not
 * resolved with an Acknowledge button, reconciliation runs, merchants'
 * balances, the tenant events' deliveries. Text from outside (alert
 * details, ids) goes into the page as text, never as markup.
 */
#include "http_int.h"

#include "../crypto/crypto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char page[] =
    "<!doctype html><html lang=en><head><meta charset=utf-8>"
    "<meta name=viewport content='width=device-width, initial-scale=1'>"
    "<title>payonce</title><style>"
    "body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}"
    "h1{font-size:20px}h2{font-size:16px;margin-top:1.6em}"
    "table{border-collapse:collapse;min-width:30em}"
    "td,th{border-bottom:1px solid #ddd;padding:3px 10px;text-align:left}"
    "td.n{text-align:right;font-variant-numeric:tabular-nums}"
    "#err{color:#b00}.muted{color:#777}button{cursor:pointer}"
    "</style></head><body>"
    "<h1>payonce <span class=muted id=when></span></h1>"
    "<form id=login><label>Admin token <input id=token type=password autocomplete=off></label> "
    "<button id=load>Show</button></form><p id=err></p>"
    "<div id=main hidden>"
    "<h2>Callbacks in the last hour</h2><p>acks <b id=acks></b>, ack latency p50 <b id=p50></b>"
    " p99 <b id=p99></b></p>"
    "<table id=callbacks><thead><tr><th>channel<th>outcome<th>layer<th>count</thead>"
    "<tbody></tbody></table>"
    "<h2>Alerts not resolved</h2><table id=alerts><thead><tr><th>created<th>tenant<th>kind"
    "<th>order<th>amount<th>detail<th>state<th></thead><tbody></tbody></table>"
    "<h2>Reconciliation runs</h2><table id=runs><thead><tr><th>imported<th>tenant<th>channel"
    "<th>period<th>rows</thead><tbody></tbody></table>"
    "<h2>Merchants' balances</h2><table id=balances><thead><tr><th>tenant<th>account"
    "<th>balance</thead><tbody></tbody></table>"
    "<h2>Tenant events</h2><p id=webhooks></p></div>"
    "<script>\n"
    "'use strict';\n"
    "const $=id=>document.getElementById(id);\n"
    "let token=sessionStorage.getItem('payonce_admin')||'';\n"
    "function money(minor,cur){const e=['JPY','KRW','VND'].includes(cur)?0:2;"
    "if(e===0)return minor+' '+cur;const neg=minor<0,a=Math.abs(minor);"
    "return (neg?'-':'')+Math.trunc(a/100)+'.'+String(a%100).padStart(2,'0')+' '+cur;}\n"
    "function row(tbody,cells,cls){const tr=document.createElement('tr');"
    "cells.forEach((c,i)=>{const td=document.createElement('td');"
    "if(c instanceof Node)td.appendChild(c);else td.textContent=c;"
    "if(cls&&cls[i])td.className=cls[i];tr.appendChild(td);});tbody.appendChild(tr);return tr;}\n"
    "function fill(id,items,cells,cls){const tb=$(id).querySelector('tbody');"
    "tb.replaceChildren();items.forEach(x=>row(tb,cells(x),cls));}\n"
    "async function call(method,path,body){const r=await fetch(path,{method,"
    "headers:{'Authorization':'Bearer '+token,'Content-Type':'application/json'},"
    "body:body?JSON.stringify(body):undefined});"
    "if(!r.ok)throw new Error(path+': HTTP '+r.status);return r.json();}\n"
    "async function ack(a){try{await call('POST','/admin/api/alerts/ack',"
    "{tenant:a.tenant,id:a.id,note:'acknowledged on the dashboard'});await load();}"
    "catch(e){$('err').textContent=e.message;}}\n"
    "async function load(){if(!token)return;let d;"
    "try{d=await call('GET','/admin/api/summary');}"
    "catch(e){$('err').textContent=e.message;$('main').hidden=true;return;}"
    "$('err').textContent='';$('main').hidden=false;$('login').hidden=true;"
    "$('when').textContent=d.now;"
    "const h=d.last_hour;$('acks').textContent=h.acks;"
    "$('p50').textContent=h.acks?'\\u2264 '+h.ack_p50_ms+' ms':'-';"
    "$('p99').textContent=h.acks?'\\u2264 '+h.ack_p99_ms+' ms':'-';"
    "fill('callbacks',h.callbacks,c=>[c.channel,c.outcome,c.outcome==='duplicate'?String(c.layer)"
    ":'',String(c.count)],[0,0,0,'n']);"
    "fill('alerts',d.alerts,a=>{const b=document.createElement('button');"
    "b.textContent=a.state==='open'?'Acknowledge':'acknowledged';b.disabled=a.state!=='open';"
    "b.dataset.id=a.id;b.onclick=()=>ack(a);return [a.created_at,a.tenant,a.reason,"
    "a.out_trade_no||'',money(a.amount,a.currency),a.detail,a.state+(a.state_by?' by "
    "'+a.state_by:''),b];},"
    "[0,0,0,0,'n']);"
    "fill('runs',d.recon_runs,r=>[r.imported_at,r.tenant,r.channel,r.period_start+' .. '+"
    "r.period_end,String(r.rows)],[0,0,0,0,'n']);"
    "fill('balances',d.merchant_balances,b=>[b.tenant,b.account,money(b.balance,b.currency)],"
    "[0,0,'n']);"
    "const w=d.webhooks;$('webhooks').textContent=w.endpoints+' endpoints, '+w.pending+"
    "' deliveries pending'+(w.oldest_pending?' (oldest '+w.oldest_pending+')':'')+', '+w.dead+"
    "' dead';}\n"
    "$('login').onsubmit=e=>{e.preventDefault();token=$('token').value;"
    "sessionStorage.setItem('payonce_admin',token);load();};\n"
    "load();setInterval(load,5000);\n"
    "</script></body></html>\n";

static bool authorized(const struct po_hcall *h)
{
    const char *auth = h->req.header(h->req.ctx, "Authorization");
    size_t n = strlen(h->ctx->admin_token);
    return auth && strncmp(auth, "Bearer ", 7) == 0 && strlen(auth + 7) == n &&
           po_ct_equal(auth + 7, h->ctx->admin_token, n);
}

static void error(struct po_hcall *h, unsigned status, const char *code, const char *message)
{
    char body[256];
    (void)snprintf(body, sizeof body, "{\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}", code,
                   message);
    po_hresp_set(&h->resp, status, "application/json", body);
}

static void answer_json(struct po_hcall *h, json_t *doc)
{
    char *text = doc ? po_json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    if (!text) {
        error(h, 500, "internal", "out of memory");
        return;
    }
    po_hresp_set(&h->resp, 200, "application/json", text);
    free(text);
}

static void summary(struct po_hcall *h, struct po_store *s)
{
    json_t *d = NULL;
    if (po_view_dashboard(s, &d)) {
        error(h, 503, "store_unavailable", "the database did not answer; retry");
        return;
    }
    char now[PO_TIME_SIZE];
    po_clock_now_iso(now, sizeof now);
    json_object_set_new(d, "now", json_string(now));
    json_object_set_new(d, "last_hour", po_metrics_last_hour());
    answer_json(h, d);
}

static void acknowledge(struct po_hcall *h, struct po_store *s)
{
    json_t *in = NULL;
    char err[PO_ERRBUF_SIZE] = "";
    if (po_json_parse(h->req.body, h->req.body_len, &in, NULL, 0) || !json_is_object(in)) {
        json_decref(in);
        error(h, 400, "invalid_request", "a JSON object {tenant, id, note?}");
        return;
    }
    const char *tenant = json_string_value(json_object_get(in, "tenant"));
    const char *id = json_string_value(json_object_get(in, "id"));
    const char *note = json_string_value(json_object_get(in, "note"));
    bool changed = false;
    po_err rc = tenant && id && po_id_valid(tenant, PO_ID_MAX)
                    ? po_alert_act(s, tenant, id, PO_ALERT_ACK, "dashboard", note, &changed, err,
                                   sizeof err)
                    : PO_ERR_INVALID;
    json_decref(in);
    if (rc == PO_ERR_NOT_FOUND)
        error(h, 404, "alert_not_found", "no such alert");
    else if (rc == PO_ERR_CONFLICT)
        error(h, 409, "alert_resolved", "the alert is resolved already");
    else if (rc == PO_ERR_INVALID)
        error(h, 400, "invalid_request", "tenant, id, and a note of one line");
    else if (rc)
        error(h, 503, "store_unavailable", "the database did not answer; retry");
    else
        answer_json(h, json_pack("{s:s, s:b}", "state", "acknowledged", "changed", changed));
}

static void admin_job(void *arg)
{
    struct po_hcall *h = arg;
    struct po_store *s = NULL;
    char err[PO_ERRBUF_SIZE] = "";
    if (po_store_pool_acquire(h->ctx->gw->pool, 2000, &s, err, sizeof err)) {
        error(h, 503, "store_unavailable", "no database connection free; retry");
    } else {
        if (strcmp(h->req.method, "POST") == 0)
            acknowledge(h, s);
        else
            summary(h, s);
        po_store_pool_release(h->ctx->gw->pool, s);
    }
    h->complete(h);
}

bool po_admin_start(struct po_hcall *h,
                    bool (*submit)(void *ctx, struct po_hcall *h, void (*job)(void *)), void *ctx)
{
    if (!h->ctx->admin_token[0]) {
        error(h, 404, "not_found", "no dashboard: serve has no --admin-token-file");
        return false;
    }
    if (strcmp(h->req.path, "/admin") == 0) {
        po_hresp_set(&h->resp, 200, "text/html; charset=utf-8", page);
        po_hresp_header(&h->resp, "Content-Security-Policy",
                        "default-src 'none'; script-src 'unsafe-inline'; style-src"
                        " 'unsafe-inline'; connect-src 'self'; form-action 'none';"
                        " frame-ancestors 'none'");
        po_hresp_header(&h->resp, "X-Frame-Options", "DENY"); /* browsers before CSP 2 */
        return false;
    }
    if (!authorized(h)) {
        error(h, 401, "unauthorized", "send the admin token as 'Authorization: Bearer …'");
        return false;
    }
    return submit(ctx, h, admin_job);
}
