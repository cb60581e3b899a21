// dashboard.mjs URL TOKEN SCREENSHOT — the operator's dashboard in Debian's
// Chromium (playwright-core, no browser download): the page loads with
// nothing fetched from elsewhere, shows the figures of the run the driver
// (dashboard_test.sh) just made, and an alert is acknowledged with its
// button. Prints one JSON line of what it saw; exits non-zero on a failed
// expectation. The driver checks the acknowledgement in the database.
import { chromium } from 'playwright-core';

const [url, token, shot] = process.argv.slice(2);
const fail = (m) => { console.error('dashboard: ' + m); process.exitCode = 1; };
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
});
const seen = {};
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
  const foreign = [];
  page.on('request', (r) => { if (!r.url().startsWith(url.replace(/\/admin$/, ''))) foreign.push(r.url()); });
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(url);
  await page.fill('#token', token);
  await page.click('#load');
  await page.waitForSelector('#main:not([hidden])', { timeout: 10000 });
  await page.waitForSelector('#callbacks tbody tr', { timeout: 10000 });
  const rows = async (id) => page.$$eval(`#${id} tbody tr`, (trs) =>
    trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)));
  seen.callbacks = await rows('callbacks');
  seen.alerts = await rows('alerts');
  seen.balances = await rows('balances');
  seen.acks = await page.textContent('#acks');
  seen.webhooks = await page.textContent('#webhooks');
  const count = (outcome, layer) => seen.callbacks
    .filter((c) => c[0] === 'wechatpay' && c[1] === outcome && (layer === undefined || c[2] === String(layer)))
    .reduce((n, c) => n + Number(c[3]), 0);
  seen.applied = count('applied');
  seen.duplicates = count('duplicate');
  seen.rejected = count('rejected');
  if (seen.applied !== Number(process.env.WANT_APPLIED)) fail(`applied ${seen.applied}, want ${process.env.WANT_APPLIED}`);
  if (seen.duplicates !== Number(process.env.WANT_DUPLICATES)) fail(`duplicates ${seen.duplicates}, want ${process.env.WANT_DUPLICATES}`);
  if (seen.rejected !== 1) fail(`rejected ${seen.rejected}, want 1`);
  const alert = seen.alerts.find((a) => a[2] === 'amount_mismatch');
  if (!alert || alert[6] !== 'open') fail('no open amount_mismatch alert: ' + JSON.stringify(seen.alerts));
  if (!seen.balances.some((b) => b[1] === 'merchant_payable:m1' && b[2] === process.env.WANT_BALANCE))
    fail('balance: ' + JSON.stringify(seen.balances));
  // acknowledge it with its button; the row says so after the refresh
  await page.click('#alerts button:not([disabled])');
  await page.waitForFunction(() => [...document.querySelectorAll('#alerts tbody tr td')]
    .some((td) => td.textContent === 'acknowledged by dashboard'), null, { timeout: 10000 });
  seen.after = await rows('alerts');
  await page.screenshot({ path: shot, fullPage: true });
  if (foreign.length) fail('fetched from elsewhere: ' + foreign.join(' '));
  if (errors.length) fail('script errors: ' + errors.join(' | '));
} catch (e) {
  fail(String(e));
} finally {
  await browser.close();
}
console.log(JSON.stringify(seen));
