// sdk/stripe.mjs — stripe-node itself against `payonce sim serve` (issue 43
// item 2b): every operation payonce uses, called the way Stripe's own SDK
// calls it, each answer checked for every member stripe-node's .d.ts
// declares required (PaymentIntent, Refund, Event, BalanceTransaction,
// Charge: members without `?`) and the right `object`; then what the
// simulator must refuse as Stripe does (an unknown parameter, a missing
// one, an id it does not have, a key reused with other parameters, a
// cancel of a PaymentIntent canceled, a refund of more than is left),
// each raised by stripe-node as the error class and code Stripe's answer
// makes. Prints "ok <op>" per call; exits 1 on any failure.
//
//   node sdk/stripe.mjs --sim http://127.0.0.1:PORT --sim-dir DIR [--payonce BIN]
// (--payonce: the binary whose `sim pay` makes a payment to refund; without
// it a succeeded PaymentIntent of the simulator's is used)
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import Stripe from 'stripe';
import { missingMembers } from '../stripe_dts.mjs';

function args(argv) {
  const out = {};
  for (let i = 2; i < argv.length; i += 2) out[argv[i].replace(/^--/, '')] = argv[i + 1];
  if (!out.sim || !out['sim-dir']) throw new Error('sdk/stripe.mjs: --sim URL --sim-dir DIR');
  return out;
}

const opt = args(process.argv);
const url = new URL(opt.sim);
const dir = opt['sim-dir'];
const key = fs.readFileSync(path.join(dir, 'stripe_api_key'), 'utf8').trim();
const stripe = new Stripe(key, {
  host: url.hostname, port: Number(url.port), protocol: 'http', maxNetworkRetries: 0,
});
let failures = 0;

const R = {
  PaymentIntent: ['resources/PaymentIntents.d.ts', 'PaymentIntent'],
  Refund: ['resources/Refunds.d.ts', 'Refund'],
  Event: ['resources/Events.d.ts', 'EventBase'],
  BalanceTransaction: ['resources/BalanceTransactions.d.ts', 'BalanceTransaction'],
  Charge: ['resources/Charges.d.ts', 'Charge'],
};
function complete(obj, kind) {
  return missingMembers(obj, ...R[kind]);
}
// A list answer: its shape and every item complete.
function listOf(list, kind, object = 'list') {
  const p = [];
  if (list.object !== object) p.push(`a ${object} is object ${object}, got ${list.object}`);
  if (!Array.isArray(list.data) || typeof list.has_more !== 'boolean' || typeof list.url !== 'string') p.push('a list has data, has_more and url');
  for (const x of list.data || []) p.push(...complete(x, kind));
  return p;
}

async function op(name, fn) {
  try {
    const problems = (await fn()) || [];
    if (problems.length) {
      failures++;
      console.log(`FAIL ${name}: ${problems.slice(0, 8).join('; ')}`);
    } else {
      console.log(`ok ${name}`);
    }
  } catch (e) {
    failures++;
    console.log(`FAIL ${name}: ${e.type || ''} ${e.code || ''} ${e.message}`);
  }
}

// The simulator refuses: stripe-node raises cls with code (null: none).
async function refused(name, cls, code, fn) {
  await op(name, async () => {
    try {
      await fn();
    } catch (e) {
      const p = [];
      if (!(e instanceof Stripe.errors[cls])) p.push(`raised ${e.type}, not ${cls}`);
      if (code !== undefined && e.code !== code) p.push(`code ${e.code}, not ${code}`);
      if (!e.requestId) p.push('no Request-Id');
      return p;
    }
    return ['accepted what Stripe refuses'];
  });
}

const no = `SDK-${Date.now()}`;
let pi = null;
let paid = null;
let refund = null;

await op('paymentIntents.create', async () => {
  pi = await stripe.paymentIntents.create({
    amount: 2000, currency: 'usd', automatic_payment_methods: { enabled: true },
    metadata: { out_trade_no: no }, description: 'stripe-node against the simulator',
  }, { idempotencyKey: `sdk-create-${no}` });
  const p = complete(pi, 'PaymentIntent');
  if (pi.status !== 'requires_payment_method' || pi.metadata.out_trade_no !== no) p.push(`status ${pi.status}, metadata ${JSON.stringify(pi.metadata)}`);
  return p;
});
await op('paymentIntents.create again with its Idempotency-Key (the same PaymentIntent)', async () => {
  const again = await stripe.paymentIntents.create({
    amount: 2000, currency: 'usd', automatic_payment_methods: { enabled: true },
    metadata: { out_trade_no: no }, description: 'stripe-node against the simulator',
  }, { idempotencyKey: `sdk-create-${no}` });
  return again.id === pi.id && again.lastResponse.headers['idempotent-replayed'] === 'true' ? [] : [`another PaymentIntent ${again.id}`];
});
await op('paymentIntents.retrieve', async () => {
  const got = await stripe.paymentIntents.retrieve(pi.id);
  return [...complete(got, 'PaymentIntent'), ...(got.id === pi.id ? [] : ['another id'])];
});
await op('paymentIntents.search (not indexed yet: read-after-write is not promised)', async () => {
  const r = await stripe.paymentIntents.search({ query: `metadata['out_trade_no']:'${no}'` });
  return [...listOf(r, 'PaymentIntent', 'search_result'), ...(r.data.length === 0 ? [] : ['found before the index has it'])];
});
fs.appendFileSync(path.join(dir, 'search_indexed'), `${pi.id}\n`);
await op('paymentIntents.search', async () => {
  const r = await stripe.paymentIntents.search({ query: `metadata['out_trade_no']:'${no}'`, limit: 5 });
  return [...listOf(r, 'PaymentIntent', 'search_result'), ...(r.data.length === 1 && r.data[0].id === pi.id ? [] : [`found ${r.data.length}`])];
});
await op('paymentIntents.cancel', async () => {
  const c = await stripe.paymentIntents.cancel(pi.id, { cancellation_reason: 'abandoned' });
  return [...complete(c, 'PaymentIntent'), ...(c.status === 'canceled' && c.canceled_at ? [] : [`status ${c.status}`])];
});

// a payment to refund
if (opt.payonce) {
  const txn = `pi_sdk${Date.now()}`;
  execFileSync(opt.payonce, ['sim', 'pay', '--dir', dir, '--channel', 'stripe', '--currency', 'USD',
    '--order', `${no}-PAID:5000`, '--txn', txn, '--lose'], { stdio: 'ignore' });
  paid = txn;
} else {
  const evs = await stripe.events.list({ type: 'payment_intent.succeeded', limit: 100 });
  paid = evs.data.find((e) => e.data.object.amount_received >= 3000)?.data.object.id;
}
await op('refunds.create', async () => {
  if (!paid) return ['no payment to refund'];
  refund = await stripe.refunds.create({
    payment_intent: paid, amount: 1000, metadata: { out_trade_no: `${no}-PAID`, out_refund_no: `${no}-R1` },
  }, { idempotencyKey: `sdk-refund-${no}` });
  return [...complete(refund, 'Refund'), ...(refund.status === 'succeeded' && refund.charge ? [] : [`status ${refund.status}`])];
});
await op('refunds.create without metadata (Stripe requires none)', async () => {
  const r = await stripe.refunds.create({ payment_intent: paid, amount: 500 });
  return complete(r, 'Refund');
});
await op('refunds.retrieve', async () => {
  const r = await stripe.refunds.retrieve(refund.id);
  return [...complete(r, 'Refund'), ...(r.id === refund.id ? [] : ['another id'])];
});
await op('refunds.list', async () => {
  const r = await stripe.refunds.list({ payment_intent: paid, limit: 1 });
  return [...listOf(r, 'Refund'), ...(r.data.length === 1 && r.has_more ? [] : [`${r.data.length} refund(s), has_more ${r.has_more}`])];
});

const types = ['payment_intent.succeeded', 'refund.created'];
await op('events.list (types[])', async () => {
  const r = await stripe.events.list({ types, limit: 100, created: { gte: Math.floor(Date.now() / 1000) - 86400 } });
  const p = listOf(r, 'Event');
  for (const e of r.data) {
    if (!types.includes(e.type)) p.push(`an event of type ${e.type}`);
    const kind = e.type.startsWith('refund.') ? 'Refund' : 'PaymentIntent';
    p.push(...complete(e.data.object, kind).map((x) => `${e.type}: ${x}`));
  }
  if (!r.data.some((e) => e.type === 'refund.created')) p.push('no refund.created');
  return p;
});
let evt = null;
await op('events.list (type, paged with starting_after)', async () => {
  const first = await stripe.events.list({ type: 'payment_intent.*', limit: 1 });
  const next = await stripe.events.list({ type: 'payment_intent.*', limit: 1, starting_after: first.data[0].id });
  evt = first.data[0];
  const p = [...listOf(first, 'Event'), ...listOf(next, 'Event')];
  if (!first.has_more || next.data[0]?.id === first.data[0].id) p.push('the second page is not the next one');
  for (const e of [...first.data, ...next.data]) if (!e.type.startsWith('payment_intent.')) p.push(`an event of type ${e.type}`);
  return p;
});
await op('events.retrieve', async () => {
  const e = await stripe.events.retrieve(evt.id);
  return [...complete(e, 'Event'), ...(e.id === evt.id ? [] : ['another id'])];
});
await op('balanceTransactions.list (expand data.source)', async () => {
  const r = await stripe.balanceTransactions.list({
    expand: ['data.source'], limit: 100, created: { gte: Math.floor(Date.now() / 1000) - 86400 },
  });
  const p = listOf(r, 'BalanceTransaction');
  for (const t of r.data) {
    if (t.type === 'charge') p.push(...complete(t.source, 'Charge'));
    else if (t.type === 'refund') p.push(...complete(t.source, 'Refund'));
    if (t.net !== t.amount - t.fee) p.push(`${t.id}: net is not amount - fee`);
  }
  if (!r.data.some((t) => t.type === 'charge') || !r.data.some((t) => t.type === 'refund')) p.push('no charge and refund among them');
  return p;
});

// what Stripe refuses, the simulator refuses, with Stripe's error
await refused('refused: an unknown parameter (parameter_unknown)', 'StripeInvalidRequestError', 'parameter_unknown',
  () => stripe.paymentIntents.create({ amount: 100, currency: 'usd', bogus_param: 'x' }));
await refused('refused: a missing parameter (parameter_missing)', 'StripeInvalidRequestError', 'parameter_missing',
  () => stripe.paymentIntents.create({ currency: 'usd' }));
await refused('refused: not an integer (parameter_invalid_integer)', 'StripeInvalidRequestError', 'parameter_invalid_integer',
  () => stripe.paymentIntents.create({ amount: 'ten', currency: 'usd' }));
await refused('refused: no such PaymentIntent (resource_missing)', 'StripeInvalidRequestError', 'resource_missing',
  () => stripe.paymentIntents.retrieve('pi_nobodyhasthis'));
await refused('refused: an Idempotency-Key with other parameters (idempotency_error)', 'StripeIdempotencyError', undefined,
  () => stripe.paymentIntents.create({ amount: 2100, currency: 'usd', metadata: { out_trade_no: no } }, { idempotencyKey: `sdk-create-${no}` }));
await refused('refused: cancel a canceled PaymentIntent (payment_intent_unexpected_state)', 'StripeInvalidRequestError', 'payment_intent_unexpected_state',
  () => stripe.paymentIntents.cancel(pi.id));
await refused('refused: refund more than is left (amount_too_large)', 'StripeInvalidRequestError', 'amount_too_large',
  () => stripe.refunds.create({ payment_intent: paid, amount: 999999 }));
await refused('refused: a key Stripe does not know', 'StripeAuthenticationError', undefined,
  () => new Stripe('sk_test_nobodyknowsthisone', { host: url.hostname, port: Number(url.port), protocol: 'http', maxNetworkRetries: 0 }).events.list());

process.exit(failures ? 1 : 0);
