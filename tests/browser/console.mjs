// console.mjs URL SHOTS_DIR — the operator's console in Debian's Chromium
// (playwright-core, no browser download), driven as three people would:
// vic (viewer) reads the overview drawn from the stored history and cannot
// act; alice (operator) sees every balance and the journal behind one,
// finds an order and its trail, works an alert with a note (written with
// markup in it, which must stay text), and reads the money report; root
// (admin) sees the operators. Also: the session cookie's flags, a POST
// without the CSRF token refused, nothing fetched from elsewhere, no
// script errors. Screenshots go to SHOTS_DIR (docs/img: the walkthrough in
// docs/operations.md). Prints one JSON line of what it saw; exits non-zero
// on a failed expectation. The driver (console_test.sh) checks the
// database afterwards. Expected figures come from the environment.
import { chromium } from 'playwright-core';

const [url, shots] = process.argv.slice(2);
const env = process.env;
const seen = {};
const fail = (m) => { console.error('console: ' + m); process.exitCode = 1; };
const expect = (what, got, want) => { if (String(got) !== String(want)) fail(`${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`); };
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

try {
  // ---- a wrong password first: refused, said on the page ----
  {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(url);
    await page.fill('#name', 'alice');
    await page.fill('#password', 'not-her-password');
    await page.click('#signin');
    await page.waitForFunction(() => document.getElementById('err').textContent.includes('Sign-in failed'));
    seen.wrong_password = await page.textContent('#err');
    expect('no session after a wrong password', (await context.cookies()).length, 0);
    await context.close();
  }

  // ---- vic, a viewer: the overview from the stored history ----
  {
    const { context, page } = await session('vic', env.VIC_PW);
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
    await shot(page, 'overview');
    // the operators tab is an admin's; a viewer's action buttons are off
    expect('a viewer sees no Operators tab', await page.isHidden('nav button[data-tab=operators]'), true);
    await page.click('nav button[data-tab=alerts]');
    await page.waitForSelector('#alert-list button[data-action]');
    seen.viewer_buttons_disabled = await page.$$eval('#alert-list button[data-action]', (b) => b.every((x) => x.disabled));
    expect('a viewer cannot press the alert actions', seen.viewer_buttons_disabled, true);
    // ... nor act by hand, even with the CSRF token: the server says no
    seen.viewer_post = await page.evaluate(async () => {
      const me = await (await fetch('/admin/api/me')).json();
      const r = await fetch('/admin/api/alerts/ack', { method: 'POST', headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': me.csrf },
        body: JSON.stringify({ tenant: 't1', id: 'al_000000000000', note: 'x' }) });
      return r.status;
    });
    expect('a viewer\'s action: 403', seen.viewer_post, 403);
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
    await context.close();
  }

  // ---- alice, an operator ----
  {
    const { context, page } = await session('alice', env.ALICE_PW);
    // a change without the CSRF token is refused (the cookie alone is not enough)
    seen.no_csrf = await page.evaluate(async () => (await fetch('/admin/api/alerts/ack', { method: 'POST',
      headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ tenant: 't1', id: 'x', note: 'x' }) })).status);
    expect('a POST without X-CSRF-Token: 403', seen.no_csrf, 403);
    // money: every account, and the journal behind one
    await page.click('nav button[data-tab=money]');
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
    // search: by the channel's transaction id, the order's whole trail
    await page.click('nav button[data-tab=search]');
    await page.fill('#q', env.SEARCH_TXN);
    await page.click('#find button');
    await page.waitForSelector('#trail:not([hidden]) #t-postings tbody tr');
    seen.trail_title = await page.textContent('#trail-title');
    expect('search by transaction id finds the order', seen.trail_title, 'Order ' + env.SEARCH_ORDER + ' of t1');
    seen.deliveries = await rows(page, 't-deliveries');
    expect('trail: its three deliveries, one applied and two duplicates caught at layer 1',
      seen.deliveries.map((d) => d[4] + (d[5] ? '/' + d[5] : '')).join(' '), 'applied duplicate/1 duplicate/1');
    seen.processed = await rows(page, 't-processed');
    seen.postings = await rows(page, 't-postings');
    seen.events = await rows(page, 't-events');
    expect('trail: one processed callback, applied', seen.processed.length + ' ' + (seen.processed[0] || [])[4], '1 applied');
    expect('trail: two postings', seen.postings.length, 2);
    if (!seen.events.some((e) => e[2] === 'payment.credited')) fail('trail: no payment.credited event: ' + JSON.stringify(seen.events));
    await shot(page, 'search');
    // alerts: acknowledge with a note that carries markup (it stays text)
    await page.click('nav button[data-tab=alerts]');
    await page.waitForSelector('#alert-list button[data-action=ack]:not([disabled])');
    seen.alerts = await rows(page, 'alert-list');
    await page.click('#alert-list button[data-action=ack]');
    await page.fill('#act-note', env.HOSTILE_NOTE);
    await page.click('#act-go');
    await page.waitForFunction(() => [...document.querySelectorAll('#alert-list tbody td')]
      .some((td) => td.textContent.startsWith('acknowledged by alice')));
    seen.after_ack = await rows(page, 'alert-list');
    const state = seen.after_ack.map((r) => r[7]).find((s) => s.startsWith('acknowledged by alice'));
    expect('the note shown as text', state, 'acknowledged by alice: ' + env.HOSTILE_NOTE);
    expect('the markup in the note did not run', await page.evaluate(() => window.__pwned === undefined && !document.querySelector('#alert-list img')), true);
    await shot(page, 'alerts');
    // ... then resolve it, saying why
    await page.click('#alert-list button[data-action=resolve]');
    await page.fill('#act-note', 'the payer was asked; the tampered callback was not theirs');
    await page.click('#act-go');
    await page.waitForFunction(() => document.getElementById('err').textContent.startsWith('Done: resolve'));
    // report: one tenant's money, reconciled
    await page.selectOption('#tenant', 't1');
    await page.click('nav button[data-tab=report]');
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
    await page.click('nav button[data-tab=operators]');
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
