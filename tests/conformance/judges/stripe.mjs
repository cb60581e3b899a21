// judges/stripe.mjs — what Stripe's API (v1) requires of a request, judged
// with stripe-node's own code and declarations (stripe_dts.mjs):
//   - Authorization: Bearer with the account's secret key (the simulator's
//     stripe_api_key), a User-Agent, Accept taking application/json;
//   - Stripe-Version pinned to the version stripe-node 23.2.0 speaks
//     (apiVersion.js), so that the answers have the shapes payonce reads;
//   - every POST with an Idempotency-Key (1-255 characters; a POST sent
//     again with the same endpoint and parameters — a retry — carries the
//     same key, and a key is never reused for another request), its body
//     application/x-www-form-urlencoded;
//   - the parameters — the form body of a POST, the query string of a GET
//     — parsed and re-encoded with stripe-node's own encoder
//     (queryStringifyRequestData) equal what payonce sent byte for byte,
//     and every one of them declared by the method's Params interface in
//     stripe-node's .d.ts (nested ones in the interface's namespace), of
//     its declared type, the required ones present;
//   - the ids in a path as stripe-node puts them there (encodeURIComponent).
import fs from 'node:fs';
import path from 'node:path';
import {
  ApiVersion, checkParams, parseForm, queryStringifyRequestData,
} from '../stripe_dts.mjs';

export function context(simDir) {
  return {
    apiKey: fs.readFileSync(path.join(simDir, 'stripe_api_key'), 'utf8').trim(),
    keys: new Map(), // Idempotency-Key -> the request it was first sent with
    sent: new Map(), // a POST's endpoint and body -> its Idempotency-Key
  };
}

// op, method, path pattern, the Params interface and its file
const OPS = [
  ['create', 'POST', /^\/v1\/payment_intents$/, 'PaymentIntentCreateParams', 'PaymentIntents'],
  ['search', 'GET', /^\/v1\/payment_intents\/search$/, 'PaymentIntentSearchParams', 'PaymentIntents'],
  ['cancel', 'POST', /^\/v1\/payment_intents\/([^/]+)\/cancel$/, 'PaymentIntentCancelParams', 'PaymentIntents'],
  ['retrieve', 'GET', /^\/v1\/payment_intents\/([^/]+)$/, 'PaymentIntentRetrieveParams', 'PaymentIntents'],
  ['refund', 'POST', /^\/v1\/refunds$/, 'RefundCreateParams', 'Refunds'],
  ['refund_retrieve', 'GET', /^\/v1\/refunds\/([^/]+)$/, 'RefundRetrieveParams', 'Refunds'],
  ['refund_list', 'GET', /^\/v1\/refunds$/, 'RefundListParams', 'Refunds'],
  ['events', 'GET', /^\/v1\/events$/, 'EventListParams', 'Events'],
  ['balance_transactions', 'GET', /^\/v1\/balance_transactions$/, 'BalanceTransactionListParams', 'BalanceTransactions'],
];

export function operation(method, url) {
  const p = url.split('?')[0];
  for (const [op, m, re, params, file] of OPS) {
    const hit = m === method && re.exec(p);
    if (hit) return { op, params, file: `resources/${file}.d.ts`, id: hit[1] };
  }
  return { op: 'unknown' };
}

export function request(req, ctx) {
  const problems = [];
  const checked = [];
  const o = operation(req.method, req.url);
  if (o.op === 'unknown') problems.push(`not a Stripe API call payonce makes: ${req.method} ${req.url}`);
  const h = req.headers;
  checked.push('authorization');
  if (h.authorization !== `Bearer ${ctx.apiKey}`) problems.push('Authorization is not Bearer with the account\'s secret key');
  checked.push('user-agent');
  if (!h['user-agent'] || !h['user-agent'].trim()) problems.push('no User-Agent');
  checked.push('accept');
  if (!/application\/json|\*\/\*/.test(h.accept || '')) problems.push(`Accept ${h.accept} does not take application/json`);
  checked.push('stripe-version');
  if (h['stripe-version'] !== ApiVersion) problems.push(`Stripe-Version ${h['stripe-version']}, stripe-node 23.2.0 speaks ${ApiVersion}`);
  if (o.id !== undefined) {
    checked.push('path id');
    let id = o.id;
    try {
      id = decodeURIComponent(o.id);
    } catch (e) {
      problems.push(`the id in the path is not URL-encoded: ${o.id}`);
    }
    if (encodeURIComponent(id) !== o.id || !/^[A-Za-z0-9_]+$/.test(id)) problems.push(`the id in the path is not a Stripe id as stripe-node sends it: ${o.id}`);
  }
  const q = req.url.indexOf('?');
  const sent = req.method === 'POST' ? req.body : (q < 0 ? '' : req.url.slice(q + 1));
  if (req.method === 'POST') {
    checked.push('idempotency-key');
    const key = h['idempotency-key'];
    if (!key || key.length > 255) {
      problems.push('a POST without an Idempotency-Key (1-255 characters)');
    } else {
      const what = `${req.url}\n${req.body}`;
      const first = ctx.keys.get(key);
      if (first !== undefined && first !== what) problems.push(`Idempotency-Key ${key} reused for another request`);
      ctx.keys.set(key, what);
      const before = ctx.sent.get(what);
      if (before !== undefined && before !== key) problems.push(`the same request sent again with another Idempotency-Key (${before}, now ${key}): a retry must reuse its key`);
      ctx.sent.set(what, key);
    }
    checked.push('content-type');
    if (sent && !/^application\/x-www-form-urlencoded/.test(h['content-type'] || '')) problems.push(`a body sent as ${h['content-type']}`);
  } else if (req.body.length) {
    problems.push('a GET with a body');
  }
  if (o.op !== 'unknown') {
    checked.push('stripe-node encoding');
    let params = null;
    try {
      params = parseForm(sent);
    } catch (e) {
      problems.push(`the parameters do not parse: ${e.message}`);
    }
    if (params) {
      const again = queryStringifyRequestData(params);
      if (again !== sent) problems.push(`stripe-node encodes these parameters as ${again}, payonce sent ${sent}`);
      checked.push(o.params);
      const [wrong, unjudged] = checkParams(params, o.file, o.params);
      problems.push(...wrong.map((w) => `${o.params}: ${w}`));
      if (unjudged.length) checked.push(`(types not resolved: ${unjudged.join(', ')})`);
      if (o.op === 'refund' && !params.payment_intent && !params.charge) problems.push('a refund names neither payment_intent nor charge');
    }
  }
  return { op: o.op, problems, checked };
}
