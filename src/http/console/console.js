// console.js — the operator's console (src/http/admin.c serves it). Every
// value from the server is put into the page as text (textContent, SVG
// text nodes), never as markup; every change is a POST carrying the
// session's CSRF token. No library: the charts are SVG drawn here from
// the stored history (/admin/api/overview).
'use strict';

const $ = (id) => document.getElementById(id);
let me = null;          // {name, role, csrf}
let tab = 'overview';
const SVG = 'http://www.w3.org/2000/svg';

// An amount as a person reads it, in major units with its currency, the
// way the command line prints it (po_money_format_fine in src/core/core.c;
// tests/browser/money.mjs holds both to the same cases): `fine` more digits
// than the minor unit (fees are thousandths of it: 3), shown only as far
// as they are not zero. Integer arithmetic (BigInt): no float near money.
const exponent = (cur) => (['JPY', 'KRW', 'VND'].includes(cur) ? 0 : 2); // po_currency_exponent
function money(amount, cur, fine = 0) {
  if (!Number.isInteger(amount)) return '-';
  const e = exponent(cur);
  let digits = e + fine;
  const neg = amount < 0, a = BigInt(Math.abs(amount)), div = 10n ** BigInt(digits);
  let frac = a % div;
  while (digits > e && frac % 10n === 0n) { frac /= 10n; digits--; }
  const whole = String(a / div) + (digits ? '.' + String(frac).padStart(digits, '0') : '');
  return (neg ? '-' : '') + whole + ' ' + (cur || '?');
}
function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}
function fill(tableId, items, cells, opts = {}) {
  const tb = $(tableId).querySelector('tbody');
  tb.replaceChildren();
  const numeric = [...$(tableId).querySelectorAll('thead th')].map((th) => th.classList.contains('n'));
  for (const x of items) {
    const tr = el('tr');
    cells(x).forEach((c, i) => {
      const td = el('td', null, numeric[i] ? 'n' : '');
      if (c instanceof Node) td.appendChild(c); else td.textContent = c === null || c === undefined ? '' : String(c);
      tr.appendChild(td);
    });
    if (opts.pick) { tr.className = 'pick'; tr.onclick = () => opts.pick(x); }
    tb.appendChild(tr);
  }
  if (!items.length) {
    const tr = el('tr'), td = el('td', opts.empty || 'nothing here', 'muted');
    td.colSpan = numeric.length; tr.appendChild(td); tb.appendChild(tr);
  }
}
function say(msg, ok) { $('err').textContent = msg || ''; $('err').className = ok ? 'ok' : ''; }

async function call(method, path, body) {
  const headers = {};
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (method === 'POST' && me && me.csrf) headers['X-CSRF-Token'] = me.csrf;
  const r = await fetch(path, { method, headers, credentials: 'same-origin',
    body: body === undefined ? undefined : JSON.stringify(body) });
  let doc = null;
  try { doc = await r.json(); } catch (e) { doc = null; }
  if (r.status === 401 && path !== '/admin/login') { signedOut(); }
  if (!r.ok) throw new Error((doc && doc.error && doc.error.message) || ('HTTP ' + r.status));
  return doc;
}
function q(params) {
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== '' && v !== undefined && v !== null) u.set(k, v);
  const s = u.toString();
  return s ? '?' + s : '';
}
const tenant = () => $('tenant').value;

// ---- signing in and out ----
function signedOut() {
  me = null;
  $('tabs').hidden = true; $('bar').hidden = true;
  document.querySelectorAll('section.tab').forEach((s) => { s.hidden = true; });
  $('login-view').hidden = false;
}
async function signedIn(doc) {
  me = doc;
  $('login-view').hidden = true; $('tabs').hidden = false; $('bar').hidden = false;
  $('who').textContent = me.name + ' (' + me.role + ')';
  document.querySelectorAll('[data-role=admin]').forEach((b) => { b.hidden = me.role !== 'admin'; });
  const t = await call('GET', '/admin/api/tenants');
  const sel = $('tenant'), keep = sel.value;
  sel.replaceChildren(el('option', 'every tenant'));
  sel.firstChild.value = '';
  for (const x of t) { const o = el('option', x.tenant); o.value = x.tenant; sel.appendChild(o); }
  sel.value = keep;
  show(location.hash.slice(1) || 'overview');
}
$('login').onsubmit = async (e) => {
  e.preventDefault();
  try {
    const doc = await call('POST', '/admin/login', { name: $('name').value, password: $('password').value });
    $('password').value = '';
    say('');
    await signedIn(doc);
  } catch (err) { say('Sign-in failed: ' + err.message); }
};
$('logout').onclick = async () => {
  try { await call('POST', '/admin/logout', {}); } catch (e) { /* signed out either way */ }
  signedOut();
};

// ---- tabs ----
const loaders = {};
async function show(name) {
  if (!loaders[name] || (name === 'operators' && me.role !== 'admin')) name = 'overview';
  tab = name;
  if (location.hash !== '#' + name) history.replaceState(null, '', '#' + name);
  document.querySelectorAll('section.tab').forEach((s) => { s.hidden = s.id !== name; });
  document.querySelectorAll('nav button').forEach((b) => b.classList.toggle('on', b.dataset.tab === name));
  say('');
  try { await loaders[name](); } catch (e) { say(e.message); }
}
document.querySelectorAll('nav button').forEach((b) => { b.onclick = () => show(b.dataset.tab); });
$('tenant').onchange = () => show(tab);

// ---- overview: the stored history, drawn ----
function svg(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = String(text);
  return e;
}
const COLORS = ['#2f6fde', '#8a94a6', '#d9822b', '#c23030', '#0f9960', '#7157d9'];
// lines: [{name, values: [number|null]}]; labels: x labels
function chart(box, labels, lines, unit) {
  const W = 960, H = 220, L = 56, R = 12, T = 12, B = 28;
  const s = svg('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img' });
  const all = lines.flatMap((l) => l.values).filter((v) => v !== null);
  const max = Math.max(1, ...all);
  const x = (i) => L + (labels.length < 2 ? 0 : (i * (W - L - R)) / (labels.length - 1));
  const y = (v) => T + (H - T - B) * (1 - v / max);
  for (let k = 0; k <= 4; k++) {
    const v = (max * k) / 4;
    s.appendChild(svg('line', { x1: L, x2: W - R, y1: y(v), y2: y(v), stroke: '#e2e5ea' }));
    s.appendChild(svg('text', { x: L - 6, y: y(v) + 4, 'text-anchor': 'end', 'font-size': 11, fill: '#6b7385' },
      unit ? unit(v) : (Number.isInteger(v) ? v : v.toFixed(1))));
  }
  const every = Math.max(1, Math.ceil(labels.length / 8));
  labels.forEach((lab, i) => {
    if (i % every === 0) s.appendChild(svg('text', { x: x(i), y: H - 8, 'text-anchor': 'middle', 'font-size': 11, fill: '#6b7385' }, lab));
  });
  lines.forEach((l, n) => {
    let d = '';
    l.values.forEach((v, i) => { if (v !== null) d += (d && l.values[i - 1] !== null ? 'L' : 'M') + x(i).toFixed(1) + ',' + y(v).toFixed(1); });
    if (d) s.appendChild(svg('path', { d, fill: 'none', stroke: COLORS[n % COLORS.length], 'stroke-width': 2, 'data-series': l.name }));
    // a point stands alone when its neighbours have no value: a dot
    l.values.forEach((v, i) => {
      if (v !== null && (l.values[i - 1] ?? null) === null && (l.values[i + 1] ?? null) === null)
        s.appendChild(svg('circle', { cx: x(i), cy: y(v), r: 3, fill: COLORS[n % COLORS.length] }));
    });
  });
  const legend = el('div', null, 'legend');
  lines.forEach((l, n) => {
    const sp = el('span'), i = el('i'); i.style.background = COLORS[n % COLORS.length];
    sp.appendChild(i); sp.appendChild(document.createTextNode(l.name)); legend.appendChild(sp);
  });
  box.replaceChildren(s, legend);
}
function rate(p) {
  const done = p.applied + p.duplicate + p.rejected + p.ignored;
  return p.acks ? ((100 * done) / p.acks).toFixed(1) + ' %' : '-';
}
function volumeText(v) {
  const e = Object.entries(v || {});
  return e.length ? e.map(([c, m]) => money(m, c)).join(', ') : '-';
}
loaders.overview = async () => {
  const d = await call('GET', '/admin/api/overview' + q({ tenant: tenant(), hours: $('hours').value }));
  const tot = { applied: 0, duplicate: 0, rejected: 0, failed: 0, ignored: 0, acks: 0, volume: {} };
  for (const p of d.series) {
    for (const k of ['applied', 'duplicate', 'rejected', 'failed', 'ignored', 'acks']) tot[k] += p[k];
    for (const [c, m] of Object.entries(p.volume)) tot.volume[c] = (tot.volume[c] || 0) + m;
  }
  const worst = (k) => d.by_tenant_channel.reduce((m, r) => (r[k] !== null && r[k] > m ? r[k] : m), 0);
  const cards = [['credited', volumeText(tot.volume)], ['payments applied', tot.applied],
    ['duplicates', tot.duplicate], ['rejected', tot.rejected], ['failed (FAIL acks)', tot.failed],
    ['success rate', rate(tot)], ['p99 ack (worst pair)', worst('ack_p99_ms') ? '≤ ' + worst('ack_p99_ms') + ' ms' : '-']];
  $('cards').replaceChildren(...cards.map(([k, v]) => { const c = el('div', null, 'card'); c.id = 'card-' + k.split(' ')[0]; c.appendChild(el('b', v)); c.appendChild(el('span', k, 'muted')); return c; }));
  const labels = d.series.map((p) => (d.step_s < 3600 ? p.at.slice(11, 16) : p.at.slice(5, 13).replace('T', ' ') + 'h'));
  chart($('chart-count'), labels, ['applied', 'duplicate', 'rejected', 'failed'].map((k) => ({ name: k, values: d.series.map((p) => p[k]) })));
  chart($('chart-latency'), labels, [
    { name: 'p50', values: d.series.map((p) => (p.ack_p50_ms === null || p.ack_p50_ms < 0 ? null : p.ack_p50_ms)) },
    { name: 'p99', values: d.series.map((p) => (p.ack_p99_ms === null || p.ack_p99_ms < 0 ? null : p.ack_p99_ms)) }]);
  const curs = [...new Set(d.series.flatMap((p) => Object.keys(p.volume)))];
  chart($('chart-volume'), labels, curs.map((c) => ({ name: c + ' (major units)', values: d.series.map((p) => (p.volume[c] || 0) / 10 ** exponent(c)) })));
  fill('pairs', d.by_tenant_channel, (r) => [r.tenant, r.channel, r.applied, r.duplicate, r.rejected, r.failed, rate(r),
    r.ack_p50_ms === null ? '-' : r.ack_p50_ms, r.ack_p99_ms === null ? '-' : r.ack_p99_ms, volumeText(r.volume)],
  { empty: 'no callbacks in this window' });
};
$('hours').onchange = () => show('overview');

// ---- money: every account, and the journal behind one ----
loaders.money = async () => {
  $('journal').hidden = true;
  const a = await call('GET', '/admin/api/accounts' + q({ tenant: tenant() }));
  fill('accounts', a, (x) => [x.tenant, x.kind, x.account, money(x.balance, x.currency), x.updated_at],
    { pick: openJournal, empty: 'no postings yet' });
};
async function openJournal(x) {
  try {
    const j = await call('GET', '/admin/api/journal' + q({ tenant: x.tenant, account: x.account, currency: x.currency }));
    $('journal').hidden = false;
    $('journal-title').textContent = x.tenant + ' · ' + x.account + ' · ' + x.currency;
    const t = j.totals;
    $('journal-totals').textContent = t.postings + ' postings sum to ' + money(t.sum, x.currency) +
      '; the balance is ' + money(t.balance, x.currency) + (t.sum === t.balance ? ' (equal)' : ' (DIFFERENT: payonce verify)') +
      (t.postings > j.postings.length ? '; the newest ' + j.postings.length + ' shown' : '');
    fill('postings', j.postings, (p) => [p.created_at, p.key, p.kind, p.out_trade_no, p.out_refund_no, money(p.amount, x.currency)]);
  } catch (e) { say(e.message); }
}

// ---- search and the order's trail ----
loaders.search = async () => { $('q').focus(); };
$('find').onsubmit = async (e) => {
  e.preventDefault();
  say('');
  try {
    const found = await call('GET', '/admin/api/search' + q({ tenant: tenant(), q: $('q').value.trim() }));
    $('found').hidden = false; $('trail').hidden = true;
    fill('found', found, (o) => [o.tenant, o.out_trade_no, o.channel, o.channel_txn_id, money(o.amount, o.currency), o.status, o.created_at],
      { pick: openTrail, empty: 'no order has this number or transaction id' });
    if (found.length === 1) await openTrail(found[0]);
  } catch (err) { say(err.message); }
};
async function openTrail(o) {
  const t = await call('GET', '/admin/api/order' + q({ tenant: o.tenant, out_trade_no: o.out_trade_no }));
  const od = t.order;
  $('trail').hidden = false;
  $('trail-title').textContent = 'Order ' + od.out_trade_no + ' of ' + t.tenant;
  const dl = $('trail-order'); dl.replaceChildren();
  for (const [k, v] of [['status', od.status], ['amount', money(od.amount, od.currency)], ['merchant', od.merchant],
    ['channel', od.channel], ['transaction', od.channel_txn_id], ['paid at', od.paid_at],
    ['refunded', money(od.refunded_amount, od.currency)], ['created', od.created_at]]) {
    dl.appendChild(el('dt', k)); dl.appendChild(el('dd', v === null ? '-' : v));
  }
  fill('t-deliveries', t.deliveries, (d) => [d.at, d.channel, d.request_id, d.node, d.outcome,
    d.outcome === 'duplicate' ? d.layer : '', d.reason, d.status, (d.micros / 1000).toFixed(1)],
  { empty: 'none recorded (forgeries and callbacks older than the history are not kept)' });
  fill('t-processed', t.processed, (p) => [p.first_seen_at, p.channel, p.event_type, p.source, p.outcome, p.reason, money(p.amount, p.currency), p.key]);
  const lines = t.journals.flatMap((j) => j.postings.map((p) => ({ j, p })));
  fill('t-postings', lines, ({ j, p }) => [j.created_at, j.kind + ' ' + j.key, p.account, money(p.amount, p.currency)]);
  fill('t-refunds', t.refunds, (r) => [r.out_refund_no, money(r.amount, r.currency), r.status, r.submit_state, r.created_at]);
  fill('t-alerts', t.alerts, (a) => [a.created_at, a.id, a.reason, money(a.amount, a.currency), a.detail,
    a.state + (a.state_by ? ' by ' + a.state_by : '') + (a.state_note ? ': ' + a.state_note : '')]);
  const rows = t.events.flatMap((e) => (e.deliveries.length ? e.deliveries : [null]).map((d) => ({ e, d })));
  fill('t-events', rows, ({ e, d }) => [e.created_at, e.event_id, e.type, d ? d.endpoint_id : '(no endpoint)', d ? d.state : '',
    d ? d.attempts.map((a) => '#' + a.attempt + ' ' + (a.status_code === null ? (a.error || 'no answer') : 'HTTP ' + a.status_code) + ' ' + a.latency_ms + ' ms').join('; ') : '']);
}

// ---- alerts, worked from the page ----
const ACTIONS = { acknowledge: 'ack', resolve: 'resolve', replay: 'replay', accept: 'accept', 'refund from suspense': 'refund', 'send again': 'redrive' };
// What docs/operations.md's runbook offers per alert kind; the server
// decides again (a refused action answers why).
const REPLAY = ['amount_mismatch', 'currency_mismatch', 'channel_mismatch', 'unknown_order'];
const REFUND = ['amount_mismatch', 'currency_mismatch', 'channel_mismatch', 'paid_after_close', 'duplicate_payment'];
function actionsFor(a) {
  const list = [];
  if (a.state === 'open') list.push('acknowledge');
  if (a.state !== 'resolved') {
    list.push('resolve');
    if (REPLAY.includes(a.reason)) list.push('replay');
    if (a.reason === 'refund_after_close') list.push('accept');
    if (REFUND.includes(a.reason)) list.push('refund from suspense');
    if (a.reason === 'webhook_dead_letter') list.push('send again');
  }
  return list;
}
let acting = null;
loaders.alerts = async () => {
  $('act').hidden = true;
  const list = await call('GET', '/admin/api/alerts' + q({ tenant: tenant(), state: $('alert-state').value }));
  fill('alert-list', list, (a) => {
    const box = el('span');
    for (const name of actionsFor(a)) {
      const b = el('button', name);
      b.dataset.action = ACTIONS[name];
      b.disabled = me.role === 'viewer';
      b.title = me.role === 'viewer' ? 'viewers read; operators act' : '';
      b.onclick = () => startAction(a, name);
      box.appendChild(b); box.appendChild(document.createTextNode(' '));
    }
    return [a.created_at, a.tenant, a.id, a.reason, a.out_trade_no, money(a.amount, a.currency), a.detail,
      a.state + (a.state_by ? ' by ' + a.state_by : '') + (a.state_note ? ': ' + a.state_note : ''), box];
  }, { empty: 'no alerts in this state' });
};
$('alert-state').onchange = () => show('alerts');
function startAction(a, name) {
  acting = { a, action: ACTIONS[name] };
  $('act').hidden = false;
  $('act-title').textContent = name + ': ' + a.tenant + ' ' + a.id + ' (' + a.reason + ', ' + money(a.amount, a.currency) + ')';
  $('act-refund-label').hidden = acting.action !== 'refund';
  $('act-note').value = '';
  $('act-note').focus();
}
$('act-cancel').onclick = () => { $('act').hidden = true; acting = null; };
$('act').onsubmit = async (e) => {
  e.preventDefault();
  if (!acting) return;
  const body = { tenant: acting.a.tenant, id: acting.a.id, note: $('act-note').value };
  if (acting.action === 'refund') body.out_refund_no = $('act-refund').value.trim();
  try {
    const r = await call('POST', '/admin/api/alerts/' + acting.action, body);
    acting = null;
    await loaders.alerts();
    say('Done: ' + r.action + (r.outcome ? ' → ' + r.outcome : '') + (r.status ? ' → refund ' + r.status : '') +
      (r.deliveries !== undefined ? ' → ' + r.deliveries + ' deliveries sent again' : ''), true);
  } catch (err) { say(err.message); }
};

// ---- report ----
loaders.report = async () => {
  if (!tenant()) { say('Pick a tenant for its report.'); fill('report-rows', [], () => []); return; }
  const args = { tenant: tenant(), from: $('from').value, to: $('to').value };
  $('csv').href = '/admin/api/report' + q({ ...args, format: 'csv' });
  const r = await call('GET', '/admin/api/report' + q(args));
  $('reconciled').textContent = r.reconciled
    ? 'Reconciles to the ledger: ' + r.accounts_checked + ' accounts equal to the minor unit.'
    : 'Does NOT reconcile to the ledger: ' + r.first_mismatch;
  fill('report-rows', r.rows, (x) => [x.day, x.merchant, x.channel, x.journals, money(x.gross, x.currency),
    money(x.refunds, x.currency), money(x.profit_shares, x.currency), money(x.net, x.currency),
    money(x.suspense_in, x.currency), money(x.suspense_out, x.currency), money(x.fees_milli, x.currency, 3)],
  { empty: 'no journals in these days' });
};
$('report-form').onsubmit = (e) => { e.preventDefault(); show('report'); };

// ---- operators (admins) ----
loaders.operators = async () => {
  const d = await call('GET', '/admin/api/operators');
  fill('operator-list', d.operators, (o) => [o.name, o.role, o.created_at, o.last_login_at || 'never', o.sessions]);
};

// ---- start: a session already? ----
(async () => {
  try { await signedIn(await call('GET', '/admin/api/me')); } catch (e) { signedOut(); }
})();
