// console.js — the operator's console (src/http/admin.c serves it). Every
// value from the server is put into the page as text (textContent, SVG
// text nodes, attributes), never as markup; every change is a POST carrying
// the session's CSRF token. No library: the charts are SVG drawn here from
// the stored history (/admin/api/overview).
//
// Pages have addresses (#overview, #triage/orders_paying, #order/TENANT/NO,
// #alert/TENANT/ID, #event/TENANT/ID, #entry/TENANT/KEY, #endpoint/TENANT/ID,
// …): every order number, alert, journal entry and event shown is a link.
// The page shown is read again every LIVE_MS while the tab is visible and no
// action form is open ("updated HH:MM:SS" in the header says when).
'use strict';

const $ = (id) => document.getElementById(id);
const LIVE_MS = 5000;
let me = null;          // {name, role, csrf}
let route = { name: 'overview', args: [] };
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
// A link to a page of the console: #name/arg/arg (each part encoded).
function href(name, ...args) { return '#' + [name, ...args.map((a) => encodeURIComponent(a))].join('/'); }
function link(text, name, ...args) {
  if (text === null || text === undefined || text === '') return '';
  const a = el('a', text);
  a.href = href(name, ...args);
  return a;
}
const orderLink = (tenant, no) => link(no, 'order', tenant, no);
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
    if (opts.pick) { tr.className = 'pick'; tr.onclick = (ev) => { if (!(ev.target instanceof HTMLAnchorElement)) opts.pick(x); }; }
    tb.appendChild(tr);
  }
  if (!items.length) {
    const tr = el('tr'), td = el('td', opts.empty || 'nothing here', 'muted');
    td.colSpan = numeric.length; tr.appendChild(td); tb.appendChild(tr);
  }
}
function fields(dlId, pairs) {
  const dl = $(dlId); dl.replaceChildren();
  for (const [k, v] of pairs) {
    dl.appendChild(el('dt', k));
    const dd = el('dd');
    if (v instanceof Node) dd.appendChild(v); else dd.textContent = v === null || v === undefined || v === '' ? '-' : String(v);
    dl.appendChild(dd);
  }
}
function say(msg, ok) { $('err').textContent = msg || ''; $('err').className = ok ? 'ok' : ''; }
function spans(...parts) { const s = el('span'); for (const p of parts) s.append(p instanceof Node ? p : String(p)); return s; }

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
// A view's answer; none once signed out meanwhile (a reading in flight
// must not put the last operator's rows back).
async function api(view, params) {
  const doc = await call('GET', '/admin/api/' + view + q(params || {}));
  if (!me) throw new Error('signed out');
  return doc;
}
const tenant = () => $('tenant').value;
const acts = () => me && me.role !== 'viewer';
// A button for an action: disabled for a viewer (the server refuses them too).
function actButton(text, action, onclick) {
  const b = el('button', text);
  b.dataset.action = action;
  b.disabled = !acts();
  b.title = acts() ? '' : 'viewers read; operators act';
  b.onclick = onclick;
  return b;
}

// ---- signing in and out ----
// Signed out, the page holds nothing of the last operator: no name, no
// tenants, no rows.
function signedOut() {
  me = null;
  $('tabs').hidden = true; $('bar').hidden = true; $('act').hidden = true;
  $('who').textContent = ''; $('updated').textContent = '';
  const sel = $('tenant'); sel.replaceChildren(el('option', 'every tenant')); sel.firstChild.value = '';
  document.querySelectorAll('section.tab').forEach((s) => { s.hidden = true; });
  document.querySelectorAll('section.tab tbody, section.tab dl, .cards, .chart, #event-body').forEach((x) => x.replaceChildren());
  $('login-view').hidden = false;
}
async function signedIn(doc) {
  me = doc;
  $('login-view').hidden = true; $('tabs').hidden = false; $('bar').hidden = false;
  $('who').textContent = me.name + ' (' + me.role + ')';
  document.querySelectorAll('[data-role=admin]').forEach((b) => { b.hidden = me.role !== 'admin'; });
  const t = await api('tenants');
  const sel = $('tenant'), keep = sel.value;
  sel.replaceChildren(el('option', 'every tenant'));
  sel.firstChild.value = '';
  for (const x of t) { const o = el('option', x.tenant); o.value = x.tenant; sel.appendChild(o); }
  sel.value = keep;
  await go();
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

// ---- pages and their addresses ----
const loaders = {};
const TAB_OF = { order: 'search', alert: 'alerts', event: 'webhooks', entry: 'money', endpoint: 'webhooks' };
function parseHash() {
  const parts = location.hash.slice(1).split('/');
  let args = [];
  try { args = parts.slice(1).map((p) => decodeURIComponent(p)); } catch (e) { args = []; }
  return { name: parts[0] || 'overview', args };
}
let loading = false;
// Shows the page the address names and loads it; live: a reading again
// (nothing moves, errors stay quiet unless they persist).
async function go(live) {
  if (!me) return;
  let r = parseHash();
  if (!loaders[r.name] || (r.name === 'operators' && me.role !== 'admin')) r = { name: 'overview', args: [] };
  const changed = r.name !== route.name || r.args.join('/') !== route.args.join('/');
  route = r;
  if (!live) {
    document.querySelectorAll('section.tab').forEach((s) => { s.hidden = s.id !== r.name; });
    const tab = TAB_OF[r.name] || r.name;
    document.querySelectorAll('nav button').forEach((b) => b.classList.toggle('on', b.dataset.tab === tab));
    if (changed) { $('act').hidden = true; acting = null; }
    say('');
  }
  loading = true;
  try {
    await loaders[r.name](...r.args, live);
    stamp(true);
  } catch (e) {
    stamp(false);
    if (!live) say(e.message);
  } finally { loading = false; }
}
function stamp(ok) {
  if (ok) $('updated').textContent = 'updated ' + new Date().toTimeString().slice(0, 8);
  $('updated').classList.toggle('stale', !ok);
}
window.addEventListener('hashchange', () => go());
document.querySelectorAll('nav button').forEach((b) => { b.onclick = () => { location.hash = b.dataset.tab; }; });
$('tenant').onchange = () => {
  // a page of one tenant's thing stays; a list follows the filter
  if (route.args.length && TAB_OF[route.name]) return;
  if (route.name === 'triage') listState.items = [];
  go();
};

// ---- live: the page read again while it is visible ----
function busy() {
  const f = document.activeElement;
  return loading || acting !== null || !$('act').hidden || (f && (f.tagName === 'INPUT' || f.tagName === 'SELECT') && f.closest('section, form'));
}
setInterval(() => { if (me && !document.hidden && !busy()) go(true); }, LIVE_MS);
document.addEventListener('visibilitychange', () => { if (me && !document.hidden && !busy()) go(true); });

// ---- overview: the stored history, drawn ----
function svg(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = String(text);
  return e;
}
const COLORS = ['#2f6fde', '#8a94a6', '#d9822b', '#c23030', '#0f9960', '#7157d9'];
// lines: [{name, values: [number|null]}]; labels: x labels; empty: points
// before the history began (shaded, said)
function chart(box, labels, lines, opts = {}) {
  const W = 960, H = 220, L = 56, R = 12, T = 12, B = 28;
  const s = svg('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img' });
  const all = lines.flatMap((l) => l.values).filter((v) => v !== null);
  const max = Math.max(1, ...all);
  const x = (i) => L + (labels.length < 2 ? 0 : (i * (W - L - R)) / (labels.length - 1));
  const y = (v) => T + (H - T - B) * (1 - v / max);
  if (opts.empty > 0) {
    const w = Math.min(W - R, x(Math.min(opts.empty, labels.length - 1))) - L;
    s.appendChild(svg('rect', { x: L, y: T, width: Math.max(0, w), height: H - T - B, class: 'empty', 'data-empty': opts.empty }));
    s.appendChild(svg('text', { x: L + 6, y: T + 14, 'font-size': 11, fill: '#6b7385' }, opts.emptyText));
  }
  for (let k = 0; k <= 4; k++) {
    const v = (max * k) / 4;
    s.appendChild(svg('line', { x1: L, x2: W - R, y1: y(v), y2: y(v), stroke: '#e2e5ea' }));
    s.appendChild(svg('text', { x: L - 6, y: y(v) + 4, 'text-anchor': 'end', 'font-size': 11, fill: '#6b7385' },
      Number.isInteger(v) ? v : v.toFixed(1)));
  }
  const every = Math.max(1, Math.ceil(labels.length / 8));
  labels.forEach((lab, i) => {
    // (the first and the last kept inside the picture)
    const anchor = i === 0 ? 'start' : i === labels.length - 1 ? 'end' : 'middle';
    if (i % every === 0 || i === labels.length - 1)
      s.appendChild(svg('text', { x: x(i), y: H - 8, 'text-anchor': anchor, 'font-size': 11, fill: '#6b7385' }, lab));
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
const hm = (iso) => iso.slice(11, 16);
loaders.overview = async () => {
  const h = $('hours').value, fit = h === 'fit';
  const d = await api('overview', { tenant: tenant(), hours: fit ? 720 : h, fit: fit ? 1 : '' });
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
  const first = d.series.length ? d.series[0].at : null, last = d.series.length ? d.series[d.series.length - 1].at : null;
  $('window').textContent = first ? (fit ? 'Fitted to the history held: ' : 'Window: ') + first.slice(0, 16).replace('T', ' ') +
    ' to ' + last.slice(0, 16).replace('T', ' ') + ' UTC, a point every ' + (d.step_s / 60) + ' minutes' +
    (d.first_at ? '; the history begins ' + d.first_at.slice(0, 16).replace('T', ' ') : '; no history yet') + '.' : '';
  // the points before the history began: shaded, not drawn as zeros
  const begins = d.first_at ? Date.parse(d.first_at) : Infinity;
  const empty = d.series.filter((p) => Date.parse(p.at) + d.step_s * 1000 <= begins).length;
  const opts = { empty: empty === d.series.length ? 0 : empty, emptyText: d.first_at ? 'no history before ' + hm(d.first_at) : '' };
  const labels = d.series.map((p) => (d.step_s < 3600 ? hm(p.at) : p.at.slice(5, 13).replace('T', ' ') + 'h'));
  const val = (i, v) => (i < opts.empty ? null : v);
  chart($('chart-count'), labels, ['applied', 'duplicate', 'rejected', 'failed'].map((k) => ({ name: k, values: d.series.map((p, i) => val(i, p[k])) })), opts);
  chart($('chart-latency'), labels, [
    { name: 'p50', values: d.series.map((p) => (p.ack_p50_ms === null || p.ack_p50_ms < 0 ? null : p.ack_p50_ms)) },
    { name: 'p99', values: d.series.map((p) => (p.ack_p99_ms === null || p.ack_p99_ms < 0 ? null : p.ack_p99_ms)) }], opts);
  const curs = [...new Set(d.series.flatMap((p) => Object.keys(p.volume)))];
  chart($('chart-volume'), labels, curs.map((c) => ({ name: c + ' (major units)', values: d.series.map((p, i) => val(i, (p.volume[c] || 0) / 10 ** exponent(c))) })), opts);
  fill('pairs', d.by_tenant_channel, (r) => [r.tenant, r.channel, r.applied, r.duplicate, r.rejected, r.failed, rate(r),
    r.ack_p50_ms === null ? '-' : r.ack_p50_ms, r.ack_p99_ms === null ? '-' : r.ack_p99_ms, volumeText(r.volume)],
  { empty: 'no callbacks in this window' });
};
$('hours').onchange = () => go();

// ---- paged lists: the first page, then More; read again live as far as shown ----
// st: {items, next, more}; get(after, limit) → a page {items, more, next}
async function paged(st, get, live, more) {
  if (more) {
    const p = await get(st.next, 20);
    st.items = st.items.concat(p.items); st.more = p.more; st.next = p.next;
  } else {
    const p = await get('', Math.min(100, Math.max(20, live ? st.items.length : 20)));
    st.items = p.items; st.more = p.more; st.next = p.next;
  }
  return st;
}
function orderCells(o) {
  return [o.tenant, orderLink(o.tenant, o.out_trade_no), o.channel, o.channel_txn_id, money(o.amount, o.currency), o.status, o.created_at];
}
function refundCells(r) {
  return [r.tenant, r.out_refund_no, orderLink(r.tenant, r.out_trade_no), money(r.amount, r.currency), r.status,
    (r.submit_state || '-') + (r.submit_attempts ? ' (' + r.submit_attempts + ' tries)' : '') + (r.submit_error ? ': ' + r.submit_error : ''), r.created_at];
}
const answer = (d) => (d.last_status !== null ? 'HTTP ' + d.last_status : '') + (d.last_error ? (d.last_status !== null ? ': ' : '') + d.last_error : '');

// ---- triage: counts, and the list by state ----
const LISTS = { orders_paying: 'orders PAYING', orders_expired: 'orders past their expiry, still PAYING',
  refunds_processing: 'refunds PROCESSING', deliveries_failing: 'webhook deliveries failing', dead_letters: 'dead letters' };
const listState = { name: '', items: [], more: false, next: null };
loaders.triage = async (name, live) => {
  if (typeof name !== 'string' || !LISTS[name]) { live = name === true ? true : live; name = ''; }
  const c = await api('counts', { tenant: tenant() });
  $('counts').replaceChildren(...Object.keys(LISTS).map((k) => {
    const card = el('div', null, 'card pick' + (k === name ? ' on' : '') + (c[k].count && k !== 'orders_paying' ? ' hot' : ''));
    card.id = 'count-' + k;
    card.appendChild(el('b', c[k].count + (c[k].capped ? '+' : '')));
    card.appendChild(el('span', LISTS[k], 'muted'));
    card.onclick = () => { location.hash = href('triage', k); };
    return card;
  }));
  $('list').hidden = !name;
  if (!name) return;
  if (listState.name !== name) Object.assign(listState, { name, items: [], more: false, next: null });
  await showList(live, false);
};
async function showList(live, more) {
  const name = listState.name;
  await paged(listState, (after, limit) => api('list', { name, tenant: tenant(), after, limit }), live, more);
  $('list-title').textContent = LISTS[name] + ' — ' + listState.items.length + ' shown' + (listState.more ? ', more below' : '');
  const kind = name.startsWith('orders') ? 'orders' : name.startsWith('refunds') ? 'refunds' : 'deliveries';
  for (const k of ['orders', 'refunds', 'deliveries']) $('list-' + k).hidden = k !== kind;
  if (kind === 'orders')
    fill('list-orders', listState.items, (o) => [...orderCells(o).slice(0, 7), o.time_expire || '-'], { empty: 'none' });
  else if (kind === 'refunds')
    fill('list-refunds', listState.items, refundCells, { empty: 'none' });
  else
    fill('list-deliveries', listState.items, (d) => [d.tenant, link(d.event_id, 'event', d.tenant, d.event_id), d.type,
      link(d.endpoint_id, 'endpoint', d.tenant, d.endpoint_id), orderLink(d.tenant, d.object_id), d.attempts, answer(d),
      d.next_at, d.created_at], { empty: 'none' });
  $('list-more').hidden = !listState.more;
}
$('list-more').onclick = () => showList(false, true).catch((e) => say(e.message));

// ---- search: prefix or substring, paged ----
const found = { key: '', items: [], more: false, next: null, doc: null };
loaders.search = async (live) => {
  if (live !== true) { $('q').focus(); return; }
  if (found.key) await runFind(true, false);
};
function findArgs() { return { q: $('q').value.trim(), field: $('field').value, match: $('match').value, tenant: tenant() }; }
async function runFind(live, more) {
  const a = found.args;
  await paged(found, async (after, limit) => { const d = await api('find', { ...a, after, limit }); found.doc = d; return d; }, live, more);
  const refunds = a.field === 'refund';
  $('found').hidden = refunds; $('found-refunds').hidden = !refunds;
  const what = { order: 'order numbers', txn: 'transaction ids', refund: 'refund numbers' }[a.field];
  $('found-note').textContent = found.items.length + ' found: ' + what + (a.match === 'prefix' ? ' starting with ' : ' containing ') + '“' + a.q + '”' +
    (a.match === 'contains' ? ' (a substring search reads at most 2,000 ' + (refunds ? 'refunds' : 'orders, newest first,') + ' at a time; More goes on)' : '') +
    (found.more ? '; there is more' : '');
  if (refunds) fill('found-refunds', found.items, refundCells, { empty: 'no refund number matches' });
  else fill('found', found.items, orderCells, { empty: 'no order matches', pick: (o) => { location.hash = href('order', o.tenant, o.out_trade_no); } });
  $('found-more').hidden = !found.more;
}
$('find').onsubmit = async (e) => {
  e.preventDefault();
  say('');
  found.args = findArgs(); found.key = JSON.stringify(found.args); found.items = [];
  try {
    await runFind(false, false);
    // exactly one order, and no more: its page
    if (found.items.length === 1 && !found.more && found.args.field !== 'refund')
      location.hash = href('order', found.items[0].tenant, found.items[0].out_trade_no);
  } catch (err) { say(err.message); }
};
$('found-more').onclick = () => runFind(false, true).catch((e) => say(e.message));

// ---- an order: its whole trail ----
loaders.order = async (tn, no) => {
  const t = await api('order', { tenant: tn, out_trade_no: no });
  const od = t.order;
  $('trail-title').textContent = 'Order ' + od.out_trade_no + ' of ' + t.tenant;
  fields('trail-order', [['status', od.status], ['amount', money(od.amount, od.currency)], ['merchant', od.merchant],
    ['channel', od.channel], ['transaction', od.channel_txn_id], ['paid at', od.paid_at],
    ['refunded', money(od.refunded_amount, od.currency)], ['created', od.created_at], ['expires', od.time_expire]]);
  // each delivery names the event it carried (and a refund's number)
  fill('t-deliveries', t.deliveries, (d) => [d.at, d.channel, d.event_type ? d.event_type + (d.out_refund_no ? ' ' + d.out_refund_no : '') : '-',
    d.request_id, d.node, d.outcome, d.outcome === 'duplicate' ? d.layer : '', d.reason, d.status, (d.micros / 1000).toFixed(1)],
  { empty: 'none recorded (forgeries and callbacks older than the history are not kept)' });
  fill('t-processed', t.processed, (p) => [p.first_seen_at, p.channel, p.event_type, p.source, p.outcome, p.reason,
    money(p.amount, p.currency), link(p.key, 'entry', t.tenant, p.key)]);
  const lines = t.journals.flatMap((j) => j.postings.map((p) => ({ j, p })));
  fill('t-postings', lines, ({ j, p }) => [j.created_at, spans(j.kind + ' ', link(j.key, 'entry', t.tenant, j.key)), p.account, money(p.amount, p.currency)]);
  fill('t-refunds', t.refunds, (r) => [r.out_refund_no, money(r.amount, r.currency), r.status, r.submit_state, r.created_at]);
  fill('t-alerts', t.alerts, (a) => [a.created_at, link(a.id, 'alert', t.tenant, a.id), a.reason, money(a.amount, a.currency), a.detail,
    a.state + (a.state_by ? ' by ' + a.state_by : '') + (a.state_note ? ': ' + a.state_note : '')]);
  const rows = t.events.flatMap((e) => (e.deliveries.length ? e.deliveries : [null]).map((d) => ({ e, d })));
  fill('t-events', rows, ({ e, d }) => [e.created_at, link(e.event_id, 'event', t.tenant, e.event_id), e.type,
    d ? link(d.endpoint_id, 'endpoint', t.tenant, d.endpoint_id) : '(no endpoint)', d ? d.state : '',
    d ? d.attempts.map((a) => '#' + a.attempt + ' ' + (a.status_code === null ? (a.error || 'no answer') : 'HTTP ' + a.status_code) + ' ' + a.latency_ms + ' ms').join('; ') : '']);
};

// ---- actions: one form for all, a note each ----
let acting = null; // {title, action, post: (note, extra) => Promise<message>, refund, since}
function startAction(a) {
  acting = a;
  $('act').hidden = false;
  $('act-title').textContent = a.title;
  $('act-refund-label').hidden = !a.refund;
  $('act-since-label').hidden = !a.since;
  $('act-note').value = ''; $('act-refund').value = ''; $('act-since').value = '';
  $('act-note').focus();
}
$('act-cancel').onclick = () => { $('act').hidden = true; acting = null; };
$('act').onsubmit = async (e) => {
  e.preventDefault();
  if (!acting) return;
  const a = acting;
  try {
    const msg = await a.post($('act-note').value, { out_refund_no: $('act-refund').value.trim(), since: $('act-since').value.trim() });
    acting = null; $('act').hidden = true;
    await go();
    say(msg, true);
  } catch (err) { say(err.message); }
};

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
function alertButtons(a) {
  const box = el('span');
  for (const name of actionsFor(a)) {
    const action = ACTIONS[name];
    box.appendChild(actButton(name, action, () => startAction({
      title: name + ': ' + a.tenant + ' ' + a.id + ' (' + a.reason + ', ' + money(a.amount, a.currency) + ')',
      refund: action === 'refund',
      post: async (note, x) => {
        const body = { tenant: a.tenant, id: a.id, note };
        if (action === 'refund') body.out_refund_no = x.out_refund_no;
        const r = await call('POST', '/admin/api/alerts/' + action, body);
        return 'Done: ' + r.action + (r.outcome ? ' → ' + r.outcome : '') + (r.status ? ' → refund ' + r.status : '') +
          (r.deliveries !== undefined ? ' → ' + r.deliveries + ' deliveries sent again' : '');
      } })));
    box.appendChild(document.createTextNode(' '));
  }
  return box;
}
const stateText = (a) => a.state + (a.state_by ? ' by ' + a.state_by : '') + (a.state_note ? ': ' + a.state_note : '');
loaders.alerts = async () => {
  const list = await api('alerts', { tenant: tenant(), state: $('alert-state').value });
  fill('alert-list', list, (a) => [a.created_at, a.tenant, link(a.id, 'alert', a.tenant, a.id), a.reason,
    orderLink(a.tenant, a.out_trade_no), money(a.amount, a.currency), a.detail, stateText(a), alertButtons(a)],
  { empty: 'no alerts in this state' });
};
$('alert-state').onchange = () => go();
loaders.alert = async (tn, id) => {
  const a = await api('alert', { tenant: tn, id });
  $('alert-title').textContent = 'Alert ' + a.id + ' of ' + a.tenant + ': ' + a.reason;
  fields('alert-fields', [['state', stateText(a)], ['order', orderLink(a.tenant, a.out_trade_no)], ['amount', money(a.amount, a.currency)],
    ['detail', a.detail], ['event', a.event_type + ' from ' + a.source], ['key', a.key], ['created', a.created_at]]);
  $('alert-actions').replaceChildren(alertButtons(a));
  fill('alert-trail', a.actions, (x) => [x.seq, x.at, x.action, x.actor, x.note], { empty: 'nothing done yet' });
};

// ---- a tenant event and its deliveries ----
function redriveButton(tn, endpoint, event, what) {
  return actButton('send again', 'redrive', () => startAction({
    title: 'send again: ' + what,
    post: async (note) => {
      const r = await call('POST', '/admin/api/webhooks/redrive', { tenant: tn, endpoint, event, note });
      return 'Done: ' + r.deliveries + ' dead deliveries of ' + r.endpoint + ' sent again';
    } }));
}
loaders.event = async (tn, id) => {
  const e = await api('event', { tenant: tn, event_id: id });
  $('event-title').textContent = 'Event ' + e.event_id + ' of ' + e.tenant + ': ' + e.type;
  fields('event-fields', [['type', e.type], ['order', orderLink(e.tenant, e.object_id)], ['created', e.created_at]]);
  fill('event-deliveries', e.deliveries, (d) => [link(d.endpoint_id, 'endpoint', e.tenant, d.endpoint_id), d.state, d.attempts, answer(d),
    d.state === 'pending' ? d.next_at : '', d.updated_at,
    d.state === 'dead' ? redriveButton(e.tenant, d.endpoint_id, e.event_id, e.event_id + ' to ' + d.endpoint_id) : ''],
  { empty: 'no endpoint takes this event' });
  fill('event-attempts', e.attempts, (a) => [a.endpoint, a.attempt, a.at, a.status !== null ? 'HTTP ' + a.status : a.error || 'no answer', a.latency_ms, a.result]);
  $('event-body').textContent = JSON.stringify(e.body, null, 2);
};

// ---- a journal entry ----
loaders.entry = async (tn, key) => {
  const j = await api('entry', { tenant: tn, key });
  $('entry-title').textContent = 'Journal ' + j.kind + ' of ' + j.tenant;
  fields('entry-fields', [['key', j.key], ['kind', j.kind], ['order', orderLink(j.tenant, j.out_trade_no)], ['refund', j.out_refund_no],
    ['currency', j.currency], ['created', j.created_at]]);
  fill('entry-postings', j.postings, (p) => [p.line, p.account, money(p.amount, p.currency)]);
  const n = j.processed;
  fields('entry-processed', n ? [['channel', n.channel], ['event', n.event_type], ['source', n.source], ['outcome', n.outcome + (n.reason ? ' (' + n.reason + ')' : '')],
    ['amount', money(n.amount, n.currency)], ['first seen', n.first_seen_at]] : [['', 'none (an operator\'s or a suspense entry)']]);
};

// ---- money: every account, and the journal behind one ----
let journalOf = null;
loaders.money = async () => {
  const a = await api('accounts', { tenant: tenant() });
  fill('accounts', a, (x) => [x.tenant, x.kind, x.account, money(x.balance, x.currency), x.updated_at],
    { pick: (x) => { journalOf = x; openJournal().catch((e) => say(e.message)); }, empty: 'no postings yet' });
  if (journalOf) await openJournal();
};
async function openJournal() {
  const x = journalOf;
  const j = await api('journal', { tenant: x.tenant, account: x.account, currency: x.currency });
  $('journal').hidden = false;
  $('journal-title').textContent = x.tenant + ' · ' + x.account + ' · ' + x.currency;
  const t = j.totals;
  $('journal-totals').textContent = t.postings + ' postings sum to ' + money(t.sum, x.currency) +
    '; the balance is ' + money(t.balance, x.currency) + (t.sum === t.balance ? ' (equal)' : ' (DIFFERENT: payonce verify)') +
    (t.postings > j.postings.length ? '; the newest ' + j.postings.length + ' shown' : '');
  fill('postings', j.postings, (p) => [p.created_at, link(p.key, 'entry', x.tenant, p.key), p.kind, orderLink(x.tenant, p.out_trade_no),
    p.out_refund_no, money(p.amount, x.currency)]);
}

// ---- webhook endpoints, one endpoint and its dead letters ----
const capped = (n) => (n >= 10000 ? '10000+' : n);
loaders.webhooks = async () => {
  const list = await api('webhooks', { tenant: tenant() });
  fill('endpoints', list, (e) => [e.tenant, link(e.id, 'endpoint', e.tenant, e.id), e.url, e.events, e.failing_since || '-',
    capped(e.pending), capped(e.dead), e.created_at], { empty: 'no endpoint' });
};
const dead = { key: '', items: [], more: false, next: null };
loaders.endpoint = async (tn, id, live) => {
  const key = tn + '/' + id;
  if (dead.key !== key) Object.assign(dead, { key, items: [], more: false, next: null });
  let doc = null;
  await paged(dead, async (after, limit) => { doc = await api('endpoint', { tenant: tn, id, after, limit }); return doc.dead_letters; }, live, false);
  showEndpoint(doc, tn, id);
};
function showEndpoint(doc, tn, id) {
  const e = doc.endpoint;
  $('endpoint-title').textContent = 'Endpoint ' + e.id + ' of ' + e.tenant;
  fields('endpoint-fields', [['url', e.url], ['events', e.events], ['failing since', e.failing_since], ['pending', capped(e.pending)],
    ['dead letters', capped(e.dead)], ['created', e.created_at], ['removed', e.removed_at]]);
  $('redrive-all').disabled = !acts() || !!e.removed_at;
  $('redrive-all').onclick = () => startAction({
    title: 'send the dead letters of ' + e.id + ' again (' + capped(e.dead) + ')', since: true,
    post: async (note, x) => {
      const r = await call('POST', '/admin/api/webhooks/redrive', { tenant: tn, endpoint: id, note, since: x.since || undefined });
      return 'Done: ' + r.deliveries + ' dead deliveries of ' + r.endpoint + ' sent again';
    } });
  fill('dead-letters', dead.items, (d) => [d.created_at, link(d.event_id, 'event', d.tenant, d.event_id), d.type,
    orderLink(d.tenant, d.object_id), d.attempts, answer(d), d.updated_at,
    e.removed_at ? '' : redriveButton(d.tenant, d.endpoint_id, d.event_id, d.event_id + ' to ' + d.endpoint_id)],
  { empty: 'no dead letters' });
  $('dead-more').hidden = !dead.more;
  fill('endpoint-actions', doc.actions, (x) => [x.at, x.actor, x.note, x.result], { empty: 'none' });
}
$('dead-more').onclick = async () => {
  try {
    const [tn, id] = route.args;
    let doc = null;
    await paged(dead, async (after, limit) => { doc = await api('endpoint', { tenant: tn, id, after, limit }); return doc.dead_letters; }, false, true);
    showEndpoint(doc, tn, id);
  } catch (e) { say(e.message); }
};

// ---- reconciliation days ----
const days = { key: '', items: [], more: false, next: null, actions: [] };
async function readDays(live, more) {
  const args = { tenant: tenant(), status: $('recon-status').value };
  await paged(days, async (after, limit) => { const d = await api('recon', { ...args, after, limit }); days.actions = d.actions; return d; }, live, more);
  fill('recon-days', days.items, (d) => [d.bill_date, d.tenant, d.channel,
    el('span', d.status + (d.state === 'none' ? ' (no trades)' : ''), d.status === 'failed' ? 'bad' : ''),
    d.why || '', d.attempts, d.last_fetch || '-', d.status === 'done' ? '' : d.next_try_at || '', d.updated_at,
    actButton('fetch again', 'fetch', () => startAction({
      title: 'fetch again: the ' + d.channel + ' bill of ' + d.bill_date + ' for ' + d.tenant,
      post: async (note) => {
        const r = await call('POST', '/admin/api/recon/fetch', { tenant: d.tenant, channel: d.channel, date: d.bill_date, note });
        return 'Done: the bill of ' + d.bill_date + ' → ' + r.state + (r.why ? ' (' + r.why + ')' : '') +
          (r.imported ? ': ' + r.rows + ' rows, ' + r.matched + ' matched, ' + r.replayed + ' replayed' : '');
      } }))], { empty: 'no day fetched yet (serve --recon-interval, or payonce recon fetch)' });
  $('recon-more').hidden = !days.more;
  fill('recon-actions', days.actions, (x) => [x.at, x.tenant, x.target, x.actor, x.note, x.result], { empty: 'none' });
}
loaders.recon = (live) => readDays(live === true, false);
$('recon-status').onchange = () => { days.items = []; go(); };
$('recon-more').onclick = () => readDays(false, true).catch((e) => say(e.message));

// ---- certificates and keys ----
loaders.keys = async () => {
  const list = await api('keys', { tenant: tenant() });
  fill('key-list', list, (k) => {
    const td = k.not_after === null ? 'no expiry' : k.expired ? 'EXPIRED ' + -k.days_left + ' days ago' : 'in ' + k.days_left + ' days';
    return [k.tenant, k.channel, k.kind, k.serial, k.not_after || '-',
      el('span', td, k.expired ? 'bad' : k.not_after !== null && k.days_left < 30 ? 'bad' : '')];
  }, { empty: 'no channel account' });
};

// ---- report ----
loaders.report = async () => {
  if (!tenant()) { say('Pick a tenant for its report.'); fill('report-rows', [], () => []); return; }
  const args = { tenant: tenant(), from: $('from').value, to: $('to').value };
  $('csv').href = '/admin/api/report' + q({ ...args, format: 'csv' });
  const r = await api('report', args);
  $('reconciled').textContent = r.reconciled
    ? 'Reconciles to the ledger: ' + r.accounts_checked + ' accounts equal to the minor unit.'
    : 'Does NOT reconcile to the ledger: ' + r.first_mismatch;
  fill('report-rows', r.rows, (x) => [x.day, x.merchant, x.channel, x.journals, money(x.gross, x.currency),
    money(x.refunds, x.currency), money(x.profit_shares, x.currency), money(x.net, x.currency),
    money(x.suspense_in, x.currency), money(x.suspense_out, x.currency), money(x.fees_milli, x.currency, 3)],
  { empty: 'no journals in these days' });
};
$('report-form').onsubmit = (e) => { e.preventDefault(); go(); };

// ---- operators (admins) ----
loaders.operators = async () => {
  const d = await api('operators');
  fill('operator-list', d.operators, (o) => [o.name, o.role, o.created_at, o.last_login_at || 'never', o.sessions]);
};

// ---- start: a session already? ----
(async () => {
  try { await signedIn(await call('GET', '/admin/api/me')); } catch (e) { signedOut(); }
})();
