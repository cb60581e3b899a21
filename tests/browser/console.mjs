// console.mjs URL SHOTS_DIR — the operator's console in Debian's Chromium
// (playwright-core, no browser download), driven as three people would:
// vic (viewer) reads the overview drawn from the stored history (fitted to
// the data, the empty part of a fixed window marked) and cannot act; alice
// (operator) sees every balance and the journal behind one and a journal
// entry's page, the lists by state with their counts (and one that moves
// while she watches, no reload), finds orders by prefix and substring and
// pages through them, an order's trail (each delivery naming its event),
// an event's page, works an alert with a note (written with markup in it,
// which must stay text) and reads its audit trail, sends an endpoint's
// dead letters again, fetches a failed reconciliation day again, reads the
// channels' keys and the money report; root (admin) sees the operators.
// What the pages show is compared with the database (sqlite3 or psql) and
// the CLI (PAYONCE_BIN). Also: the header before sign-in and after
// sign-out, the session cookie's flags, a POST without the CSRF token
// refused, nothing fetched from elsewhere, no script errors. Screenshots go
// to SHOTS_DIR (docs/img: the walkthrough in docs/operations.md). Prints
// one JSON line of what it saw; exits non-zero on a failed expectation. The
// driver (console_test.sh) checks the database afterwards. Expected figures
// come from the environment.
import { chromium } from 'playwright-core';
import { execFileSync } from 'node:child_process';

const [url, shots] = process.argv.slice(2);
const env = process.env;
const seen = {};
const fail = (m) => { console.error('console: ' + m); process.exitCode = 1; };
const expect = (what, got, want) => { if (String(got) !== String(want)) fail(`${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`); };
// The database, as the driver's sql() reads it: rows of |-separated text.
function db(query) {
  const out = env.BACKEND === 'postgres'
    ? execFileSync('psql', ['-XAtq', env.PAYONCE_DB, '-c', query], { encoding: 'utf8' })
    : execFileSync('sqlite3', [env.PAYONCE_DB.replace(/^sqlite:/, ''), query], { encoding: 'utf8' });
  return out.trim() === '' ? [] : out.trim().split('\n');
}
const cli = (...args) => execFileSync(env.PAYONCE_BIN, args, { encoding: 'utf8' });
const browser = await chromium.launch({
  executablePath: env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
});
const origin = new URL(url).origin;
const foreign = [], errors = [];

async function session(name, password) {
  const context = await browser.newContext({ viewport: { width: 1360, height: 900 } });
  const page = await context.newPage();
  page.on('request', (r) => { if (!r.url().startsWith(origin)) foreign.push(r.url()); });
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(url);
  await page.waitForSelector('#login-view:not([hidden])');
  await page.fill('#name', name);
  await page.fill('#password', password);
  await page.click('#signin');
  await page.waitForSelector('#tabs:not([hidden])', { timeout: 10000 });
  return { context, page };
}
const rows = (page, id) => page.$$eval(`#${id} tbody tr`, (trs) =>
  trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)));
const shot = (page, name) => page.screenshot({ path: `${shots}/console-${name}.png`, fullPage: true });
const tab = async (page, name) => { await page.click(`nav button[data-tab=${name}]`); await page.waitForSelector(`section#${name}:not([hidden])`); };
const sorted = (a) => [...a].sort().join(' ');
// Waits until fn (in the page) is true; polls, no reload.
const until = (page, fn, arg, timeout = 15000) => page.waitForFunction(fn, arg, { timeout, polling: 200 });

try {
  // ---- before sign-in: the header offers nothing but the sign-in ----
  {
    const context = await browser.newContext({ viewport: { width: 1360, height: 500 } });
    const page = await context.newPage();
    page.on('pageerror', (e) => errors.push(String(e)));
    await page.goto(url);
    await page.waitForSelector('#login-view:not([hidden])');
    seen.before_signin = { bar: await page.isVisible('#bar'), tabs: await page.isVisible('#tabs'),
      logout: await page.isVisible('#logout'), tenant: await page.isVisible('#tenant') };
    expect('before sign-in: no tenant picker, no Sign out, no tabs', JSON.stringify(seen.before_signin),
      JSON.stringify({ bar: false, tabs: false, logout: false, tenant: false }));
    await shot(page, 'login');
    // a wrong password: refused, said on the page
    await page.fill('#name', 'alice');
    await page.fill('#password', 'not-her-password');
    await page.click('#signin');
    await page.waitForFunction(() => document.getElementById('err').textContent.includes('Sign-in failed'));
    seen.wrong_password = await page.textContent('#err');
    expect('no session after a wrong password', (await context.cookies()).length, 0);
    expect('after a wrong password still no Sign out', await page.isVisible('#logout'), false);
    await context.close();
  }

  // ---- vic, a viewer: the overview from the stored history ----
  {
    const { context, page } = await session('vic', env.VIC_PW);
    expect('signed in: the header names him', await page.textContent('#who'), 'vic (viewer)');
    await page.selectOption('#hours', '24');
    await page.waitForFunction(() => document.querySelector('#pairs tbody tr td') &&
      document.querySelector('#pairs tbody tr td').textContent === 't1');
    const card = async (k) => page.textContent(`#card-${k} b`);
    seen.applied = await card('payments');
    seen.duplicates = await card('duplicates');
    seen.rejected = await card('rejected');
    seen.credited = await card('credited');
    expect('overview: payments applied (stored history, across a restart)', seen.applied, env.WANT_APPLIED);
    expect('overview: duplicates', seen.duplicates, env.WANT_DUPLICATES);
    expect('overview: rejected', seen.rejected, env.WANT_REJECTED);
    expect('overview: credited volume', seen.credited, env.WANT_VOLUME);
    seen.lines = await page.$$eval('#chart-count path[data-series]', (p) => p.map((x) => x.dataset.series));
    if (!seen.lines.includes('applied') || !seen.lines.includes('duplicate')) fail('the callbacks chart has no lines: ' + seen.lines);
    seen.pairs = await rows(page, 'pairs');
    // the 24-hour window began long before the history: that part is marked, not drawn as zeros
    seen.empty_points = Number(await page.getAttribute('#chart-count rect.empty', 'data-empty'));
    if (!(seen.empty_points >= 20)) fail('24 h: the part before the history is not marked: ' + seen.empty_points);
    if (!(await page.textContent('#chart-count svg')).includes('no history before')) fail('24 h: the empty part is not said');
    // fitted to the data (the default): the window is the data's own span
    await page.selectOption('#hours', 'fit');
    await page.waitForFunction(() => document.getElementById('window').textContent.startsWith('Fitted'));
    const fit = await page.evaluate(async () => (await fetch('/admin/api/overview?hours=720&fit=1')).json());
    seen.fitted = { points: fit.series.length, step_s: fit.step_s, first: fit.series[0].at, history: fit.first_at };
    if (!(fit.step_s === 300 && fit.series.length <= 13 && Date.parse(fit.series[0].at) <= Date.parse(fit.first_at)))
      fail('fitted: not the data\'s own span in 5-minute points: ' + JSON.stringify(seen.fitted));
    const applied = fit.series.reduce((n, p) => n + p.applied, 0);
    expect('fitted: the payments are inside the window', applied, env.WANT_APPLIED);
    await shot(page, 'overview');
    // the operators tab is an admin's; a viewer's action buttons are off
    expect('a viewer sees no Operators tab', await page.isHidden('nav button[data-tab=operators]'), true);
    await tab(page, 'alerts');
    await page.waitForSelector('#alert-list button[data-action]');
    seen.viewer_buttons_disabled = await page.$$eval('#alert-list button[data-action]', (b) => b.every((x) => x.disabled));
    expect('a viewer cannot press the alert actions', seen.viewer_buttons_disabled, true);
    // ... nor act by hand, even with the CSRF token: the server says no
    seen.viewer_posts = await page.evaluate(async ([endpoint, day]) => {
      const me = await (await fetch('/admin/api/me')).json();
      const post = async (path, body) => (await fetch(path, { method: 'POST',
        headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': me.csrf }, body: JSON.stringify(body) })).status;
      return [await post('/admin/api/alerts/ack', { tenant: 't1', id: 'al_000000000000', note: 'x' }),
        await post('/admin/api/webhooks/redrive', { tenant: 't1', endpoint, note: 'x' }),
        await post('/admin/api/recon/fetch', { tenant: 't1', channel: 'wechatpay', date: day, note: 'x' })];
    }, [env.ENDPOINT, env.FAILED_DAY]);
    expect('a viewer\'s actions (alert, redrive, re-fetch): 403', seen.viewer_posts.join(' '), '403 403 403');
    const cookies = await context.cookies();
    const c = cookies.find((x) => x.name === 'po_session');
    seen.cookie = c && { httpOnly: c.httpOnly, sameSite: c.sameSite, secure: c.secure, path: c.path };
    expect('session cookie HttpOnly', c && c.httpOnly, true);
    expect('session cookie SameSite', c && c.sameSite, 'Strict');
    expect('session cookie path', c && c.path, '/admin');
    expect('the page cannot read the session cookie', await page.evaluate(() => document.cookie.includes('po_session')), false);
    await page.click('#logout');
    await page.waitForSelector('#login-view:not([hidden])');
    const after = await page.evaluate(async () => (await fetch('/admin/api/me')).status);
    expect('signed out: the session is gone', after, 401);
    seen.after_signout = { who: await page.textContent('#who'), bar: await page.isVisible('#bar'),
      rows: await page.$$eval('section.tab tbody tr', (t) => t.length) };
    expect('signed out: not the old operator, nothing of his pages', JSON.stringify(seen.after_signout),
      JSON.stringify({ who: '', bar: false, rows: 0 }));
    await context.close();
  }

  // ---- alice, an operator ----
  {
    const { context, page } = await session('alice', env.ALICE_PW);
    // a change without the CSRF token is refused (the cookie alone is not enough)
    seen.no_csrf = await page.evaluate(async () => (await fetch('/admin/api/alerts/ack', { method: 'POST',
      headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ tenant: 't1', id: 'x', note: 'x' }) })).status);
    expect('a POST without X-CSRF-Token: 403', seen.no_csrf, 403);

    // money: every account, the journal behind one, a journal entry's page
    await tab(page, 'money');
    await page.waitForSelector('#accounts tbody tr.pick');
    seen.accounts = await rows(page, 'accounts');
    const acct = (name) => seen.accounts.find((r) => r[2] === name);
    expect('money: merchant payable', acct('merchant_payable:m1') && acct('merchant_payable:m1')[3], env.WANT_PAYABLE);
    expect('money: channel clearing', acct('channel_clearing:wechatpay') && acct('channel_clearing:wechatpay')[3], env.WANT_CLEARING);
    await page.click('#accounts tbody tr.pick:has-text("merchant_payable:m1")');
    await page.waitForSelector('#journal:not([hidden]) #postings tbody tr');
    seen.journal = await page.textContent('#journal-totals');
    if (!seen.journal.includes('(equal)')) fail('the journal does not sum to the balance: ' + seen.journal);
    await shot(page, 'money');
    const key = await page.textContent('#postings tbody tr td:nth-child(2) a');
    await page.click('#postings tbody tr td:nth-child(2) a');
    await page.waitForSelector('section#entry:not([hidden]) #entry-postings tbody tr');
    seen.entry = await rows(page, 'entry-postings');
    const want = db(`SELECT line_no || '|' || account FROM posting WHERE idem_key = '${key.replace(/'/g, "''")}' ORDER BY line_no`);
    expect('a journal entry: its postings, as the database has them', seen.entry.map((r) => r[0] + '|' + r[1]).join(' '), want.join(' '));
    expect('a journal entry: its address', decodeURIComponent(await page.evaluate(() => location.hash)), '#entry/t1/' + key);

    // triage: the counts as the database has them, a list, and it moves live
    await tab(page, 'triage');
    await page.waitForSelector('#count-orders_paying b');
    const counts = async () => Object.fromEntries(await page.$$eval('#counts .card', (cs) => cs.map((c) => [c.id.slice(6), c.querySelector('b').textContent])));
    seen.counts = await counts();
    const now = new Date().toISOString();
    const wantCounts = {
      orders_paying: db("SELECT COUNT(*) FROM pay_order WHERE status = 'PAYING'")[0],
      orders_expired: db(`SELECT COUNT(*) FROM pay_order WHERE status = 'PAYING' AND expires_at < '${now}'`)[0],
      refunds_processing: db("SELECT COUNT(*) FROM refund WHERE status = 'PROCESSING'")[0],
      deliveries_failing: db("SELECT COUNT(*) FROM webhook_delivery WHERE state = 'pending' AND attempts > 0")[0],
      dead_letters: db("SELECT COUNT(*) FROM webhook_delivery WHERE state = 'dead'")[0] };
    expect('triage: the counts, as the database has them', JSON.stringify(seen.counts), JSON.stringify(wantCounts));
    expect('triage: one order past its expiry, one refund processing, one delivery failing, three dead',
      [wantCounts.orders_expired, wantCounts.refunds_processing, wantCounts.deliveries_failing, wantCounts.dead_letters].join(' '), '1 1 1 3');
    await page.click('#count-orders_expired');
    await page.waitForSelector('#list-orders:not([hidden]) tbody tr td a');
    seen.expired = (await rows(page, 'list-orders')).map((r) => r[1]);
    expect('triage: the order past its expiry', seen.expired.join(' '), 'EXP-1');
    await page.click('#count-refunds_processing');
    await page.waitForSelector('#list-refunds:not([hidden]) tbody tr td a');
    seen.processing = (await rows(page, 'list-refunds')).map((r) => r[1] + ' ' + r[2]);
    expect('triage: the refund processing, with its order', seen.processing.join(' '), 'R-20-1 D-1');
    await page.click('#count-deliveries_failing');
    await page.waitForSelector('#list-deliveries:not([hidden]) tbody tr td a');
    seen.failing = (await rows(page, 'list-deliveries')).map((r) => r[2] + ' ' + r[3] + ' ' + r[4]);
    expect('triage: the failing delivery: the closed order\'s event to the endpoint', seen.failing.join(' '), 'order.closed ' + env.ENDPOINT + ' C-1');
    await page.click('#count-orders_paying');
    await page.waitForSelector('#list-orders:not([hidden]) tbody tr td a');
    expect('triage: more PAYING orders than a page', await page.isVisible('#list-more'), true);
    await page.click('#list-more');
    await until(page, () => document.getElementById('list-more').hidden);
    seen.paying = (await rows(page, 'list-orders')).map((r) => r[0] + ' ' + r[1]);
    expect('triage: every order PAYING (two pages), as the database has them', sorted(seen.paying),
      sorted(db("SELECT tenant_id || ' ' || out_trade_no FROM pay_order WHERE status = 'PAYING'")));
    await shot(page, 'triage');
    // live: an order made with the CLI shows in the count, the page not reloaded
    await page.evaluate(() => { window.__still = 'the same page'; });
    const before = await page.textContent('#updated');
    cli('order', 'create', '--tenant', 't1', '--merchant', 'm1', '--out-trade-no', 'LIVE-1', '--amount', '42');
    const grown = String(Number(seen.counts.orders_paying) + 1);
    await until(page, (n) => document.querySelector('#count-orders_paying b').textContent === n, grown);
    seen.live = { updated_before: before, updated_after: await page.textContent('#updated'), still: await page.evaluate(() => window.__still) };
    expect('live: the same page, not reloaded', seen.live.still, 'the same page');
    if (!/^updated \d\d:\d\d:\d\d$/.test(seen.live.updated_after) || seen.live.updated_after === before)
      fail('live: the "updated" time did not move: ' + JSON.stringify(seen.live));
    if (!(await rows(page, 'list-orders')).some((r) => r[1] === 'LIVE-1')) fail('live: the list does not show LIVE-1');

    // search: "20" by prefix, then as a substring; and pages of P-
    await tab(page, 'search');
    const find = async (qv, field, match) => {
      await page.evaluate(() => { document.getElementById('found-note').textContent = ''; });
      await page.fill('#q', qv);
      await page.selectOption('#field', field);
      await page.selectOption('#match', match);
      await page.click('#find button');
      await until(page, (s) => document.getElementById('found-note').textContent.includes('“' + s + '”'), qv);
    };
    await find('20', 'order', 'prefix');
    seen.prefix = (await rows(page, 'found')).map((r) => r[0] + ' ' + r[1]);
    expect('search "20", starts with: as the database has them', sorted(seen.prefix),
      sorted(db("SELECT tenant_id || ' ' || out_trade_no FROM pay_order WHERE substr(out_trade_no, 1, 2) = '20'")));
    expect('search "20", starts with: 20-A, 20-B and t2\'s 2077', sorted(seen.prefix), sorted(['t1 20-A', 't1 20-B', 't2 2077']));
    await find('20', 'order', 'contains');
    seen.contains = (await rows(page, 'found')).map((r) => r[0] + ' ' + r[1]);
    expect('search "20", contains: as the database has them', sorted(seen.contains),
      sorted(db("SELECT tenant_id || ' ' || out_trade_no FROM pay_order WHERE out_trade_no LIKE '%20%'")));
    await shot(page, 'search');
    await find('P-', 'order', 'prefix');
    expect('search "P-": a first page of 20, and more', (await rows(page, 'found')).length + ' ' + await page.isVisible('#found-more'), '20 true');
    await page.click('#found-more');
    await until(page, () => document.getElementById('found-more').hidden);
    seen.paged = (await rows(page, 'found')).map((r) => r[1]);
    expect('search "P-": every one, once, over two pages', seen.paged.join(' '), Array.from({ length: 25 }, (_, i) => 'P-' + String(i + 1).padStart(2, '0')).join(' '));
    // the simulator's transaction ids share their first characters: several found
    const txn4 = env.SEARCH_TXN.slice(0, 4);
    const wantTxn = db(`SELECT out_trade_no FROM pay_order WHERE substr(channel_txn_id, 1, 4) = '${txn4}'`);
    if (wantTxn.length < 2) fail('the simulator\'s transaction ids no longer share a prefix: ' + wantTxn);
    await find(txn4, 'txn', 'prefix');
    seen.txn_prefix = (await rows(page, 'found')).map((r) => r[1]);
    expect('search transaction ids by their first 4 characters', sorted(seen.txn_prefix), sorted(wantTxn));
    await find('R-2', 'refund', 'prefix');
    expect('search a refund number', (await rows(page, 'found-refunds')).map((r) => r[1] + ' ' + r[2]).join(' '), 'R-20-1 D-1');
    // ... and by the whole transaction id: the order's own page, its whole trail
    await find(env.SEARCH_TXN, 'txn', 'prefix');
    await page.waitForSelector('section#order:not([hidden]) #t-postings tbody tr');
    seen.trail_title = await page.textContent('#trail-title');
    expect('search by transaction id finds the order', seen.trail_title, 'Order ' + env.SEARCH_ORDER + ' of t1');
    seen.deliveries = await rows(page, 't-deliveries');
    expect('trail: its three deliveries, one applied and two duplicates caught at layer 1',
      seen.deliveries.map((d) => d[5] + (d[6] ? '/' + d[6] : '')).join(' '), 'applied duplicate/1 duplicate/1');
    expect('trail: each delivery names the event it carried', seen.deliveries.map((d) => d[2]).join(' '), 'PAY_SUCCESS PAY_SUCCESS PAY_SUCCESS');
    seen.processed = await rows(page, 't-processed');
    seen.postings = await rows(page, 't-postings');
    seen.events = await rows(page, 't-events');
    expect('trail: one processed callback, applied', seen.processed.length + ' ' + (seen.processed[0] || [])[4], '1 applied');
    expect('trail: two postings', seen.postings.length, 2);
    if (!seen.events.some((e) => e[2] === 'payment.credited')) fail('trail: no payment.credited event: ' + JSON.stringify(seen.events));
    await shot(page, 'order');
    // the event's own page: its deliveries to the endpoint, dead
    await page.click('#t-events tbody tr td:nth-child(2) a');
    await page.waitForSelector('section#event:not([hidden]) #event-deliveries tbody tr');
    seen.event = await rows(page, 'event-deliveries');
    expect('an event\'s page: its delivery to the endpoint, dead', seen.event.map((r) => r[0] + ' ' + r[1]).join(' '), env.ENDPOINT + ' dead');
    const body = JSON.parse(await page.textContent('#event-body'));
    expect('an event\'s page: the body the endpoint receives', body.type + ' ' + body.data.object.out_trade_no, 'payment.credited ' + env.SEARCH_ORDER);
    await shot(page, 'event');

    // alerts: acknowledge with a note that carries markup (it stays text)
    await tab(page, 'alerts');
    await page.waitForSelector('#alert-list button[data-action=ack]:not([disabled])');
    seen.alerts = await rows(page, 'alert-list');
    const tamper = seen.alerts.find((r) => r[3] === 'amount_mismatch');
    expect('alerts: the tampered callback\'s comes first (newest)', seen.alerts[0][3], 'amount_mismatch');
    expect('alerts: its order is a link', await page.getAttribute('#alert-list tbody tr:first-child td:nth-child(5) a', 'href'), '#order/t1/D-4');
    await page.click('#alert-list tbody tr:first-child button[data-action=ack]');
    await page.fill('#act-note', env.HOSTILE_NOTE);
    await page.click('#act-go');
    await page.waitForFunction(() => [...document.querySelectorAll('#alert-list tbody td')]
      .some((td) => td.textContent.startsWith('acknowledged by alice')));
    seen.after_ack = await rows(page, 'alert-list');
    const state = seen.after_ack.map((r) => r[7]).find((s) => s.startsWith('acknowledged by alice'));
    expect('the note shown as text', state, 'acknowledged by alice: ' + env.HOSTILE_NOTE);
    expect('the markup in the note did not run', await page.evaluate(() => window.__pwned === undefined && !document.querySelector('#alert-list img')), true);
    await shot(page, 'alerts');
    // ... its page: the audit trail, as the database has it; resolved from there
    await page.click(`#alert-list a:text("${tamper[2]}")`);
    await page.waitForSelector('section#alert:not([hidden]) #alert-trail tbody tr');
    seen.trail = await rows(page, 'alert-trail');
    expect('an alert\'s page: its audit trail', seen.trail.map((r) => r[2] + '|' + r[3] + '|' + r[4]).join(' '), 'acknowledge|alice|' + env.HOSTILE_NOTE);
    await page.click('#alert-actions button[data-action=resolve]');
    await page.fill('#act-note', 'the payer was asked; the tampered callback was not theirs');
    await page.click('#act-go');
    await page.waitForFunction(() => document.getElementById('err').textContent.startsWith('Done: resolve'));
    await until(page, () => document.querySelectorAll('#alert-trail tbody tr').length === 2);
    expect('an alert\'s page: resolved by her', db("SELECT state || ' ' || state_by FROM alert WHERE reason = 'amount_mismatch'")[0], 'resolved alice');
    await shot(page, 'alert');

    // webhooks: the endpoint, its dead letters, sent again
    await tab(page, 'webhooks');
    await page.waitForSelector('#endpoints tbody tr td a');
    seen.endpoints = await rows(page, 'endpoints');
    const dbDead = db(`SELECT COUNT(*) FROM webhook_delivery WHERE endpoint_id = '${env.ENDPOINT}' AND state = 'dead'`)[0];
    expect('webhooks: the endpoint and its dead letters', seen.endpoints.map((r) => r[1] + ' dead ' + r[6]).join(' '), env.ENDPOINT + ' dead ' + dbDead);
    await shot(page, 'webhooks');
    await page.click('#endpoints tbody tr td a');
    await page.waitForSelector('section#endpoint:not([hidden]) #dead-letters tbody tr td a');
    seen.dead = (await rows(page, 'dead-letters')).map((r) => r[1]);
    expect('an endpoint\'s dead letters, as the database has them', sorted(seen.dead),
      sorted(db(`SELECT event_id FROM webhook_delivery WHERE endpoint_id = '${env.ENDPOINT}' AND state = 'dead'`)));
    await shot(page, 'endpoint');
    await page.click('#redrive-all');
    await page.fill('#act-note', 'the receiver is back');
    await page.click('#act-go');
    await page.waitForFunction(() => document.getElementById('err').textContent.startsWith('Done: 3 dead deliveries'));
    await page.waitForSelector('#dead-letters tbody tr td.muted');
    seen.redrive = await rows(page, 'endpoint-actions');
    expect('an endpoint\'s page: the redrive, who and what', seen.redrive.map((r) => r[1] + '|' + r[3]).join(' '), 'alice|3 dead deliveries sent again (all of them)');

    // reconciliation: the failed day fetched again
    await tab(page, 'recon');
    await page.waitForSelector('#recon-days tbody tr button');
    seen.days = (await rows(page, 'recon-days')).map((r) => r[0] + ' ' + r[3]);
    expect('reconciliation days, as the database has them (done: no bill that day)', seen.days.join(' '),
      env.FAILED_DAY + ' failed ' + env.DONE_DAY + ' done (no trades)');
    await shot(page, 'recon');
    await page.click(`#recon-days tbody tr:has-text("${env.FAILED_DAY}") button[data-action=fetch]`);
    await page.fill('#act-note', 'the channel is answering again');
    await page.click('#act-go');
    await page.waitForFunction(() => document.getElementById('err').textContent.startsWith('Done: the bill of'));
    seen.refetch = await page.textContent('#err');
    await until(page, (d) => [...document.querySelectorAll('#recon-days tbody tr')].some((tr) => tr.textContent.startsWith(d) && tr.children[3].textContent === 'done (no trades)'), env.FAILED_DAY);
    expect('re-fetched: the day as the database has it now', db(`SELECT state FROM recon_day WHERE bill_date = '${env.FAILED_DAY}'`)[0], 'none');

    // certificates and keys, as `payonce channel show` shows them
    await tab(page, 'keys');
    await page.waitForSelector('#key-list tbody tr');
    seen.keys = await rows(page, 'key-list');
    const show = JSON.parse(cli('channel', 'show', '--tenant', 't1', '--channel', 'wechatpay', '--json'));
    const pk = show.config.platform_keys[0];
    const wx = seen.keys.find((r) => r[1] === 'wechatpay');
    expect('keys: WeChat Pay\'s platform certificate, as channel show has it', wx && wx.slice(2, 5).join('|'), 'certificate|' + pk.serial + '|' + pk.not_after);
    expect('keys: every channel account\'s', sorted(seen.keys.map((r) => r[1] + ':' + r[2])), sorted(['alipay:public key', 'stripe:webhook secrets', 'wechatpay:certificate']));
    await shot(page, 'keys');

    // report: one tenant's money, reconciled
    await page.selectOption('#tenant', 't1');
    await tab(page, 'report');
    await page.waitForFunction(() => document.getElementById('reconciled').textContent.startsWith('Reconciles'));
    seen.report = await rows(page, 'report-rows');
    seen.reconciled = await page.textContent('#reconciled');
    expect('report: net of the day', seen.report[0] && seen.report[0][7], env.WANT_NET);
    const csv = await page.evaluate(async () => (await fetch(document.getElementById('csv').href)).text());
    if (!csv.startsWith('day,tenant,merchant')) fail('report CSV: ' + csv.slice(0, 80));
    await shot(page, 'report');
    await context.close();
  }

  // ---- root, an admin: the operators ----
  {
    const { context, page } = await session('root', env.ROOT_PW);
    await tab(page, 'operators');
    await page.waitForSelector('#operator-list tbody tr');
    seen.operators = await rows(page, 'operator-list');
    expect('operators listed', seen.operators.map((r) => r[0] + ':' + r[1]).join(' '), 'alice:operator root:admin vic:viewer');
    await shot(page, 'operators');
    await context.close();
  }
  if (foreign.length) fail('fetched from elsewhere: ' + foreign.join(' '));
  if (errors.length) fail('script errors: ' + errors.join(' | '));
} catch (e) {
  fail(String(e && e.stack || e));
} finally {
  await browser.close();
}
console.log(JSON.stringify(seen));
