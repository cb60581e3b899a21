// sdk/wechatpay.mjs — part (b) of conformance[wechatpay] (issue 43 item 3):
// WeChat Pay's own Node SDK, wechatpay-axios-plugin, as a merchant's client
// of `payonce sim serve`. Its client signs every request with the merchant
// key and verifies every answer's Wechatpay-Signature with the platform
// certificate (an answer it cannot verify is an error); each operation
// payonce makes at WeChat Pay is called, and each answer must carry every
// member the API's published answer model marks required (REQUIRED below,
// with the page each list comes from). Prints "ok <op>" per call; exits 1
// on the first failure, naming it.
//
//   node sdk/wechatpay.mjs --sim http://127.0.0.1:PORT --sim-dir DIR
//
// DIR is the simulator's (sim.json, merchant_private_key.pem,
// wechatpay_platform_cert.pem, apiv3.key, payments.jsonl). The payments
// payonce's part of the test made there (lost and notified ones) are what
// the query by transaction id and the refund are about.
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import zlib from 'node:zlib';
import wechatpay from 'wechatpay-axios-plugin';

const { Wechatpay, Aes } = wechatpay;

function args(argv) {
  const out = {};
  for (let i = 2; i < argv.length; i += 2) out[argv[i].replace(/^--/, '')] = argv[i + 1];
  if (!out.sim || !out['sim-dir']) throw new Error('usage: wechatpay.mjs --sim URL --sim-dir DIR');
  return out;
}

const opt = args(process.argv);
const dir = opt['sim-dir'];
const sim = JSON.parse(fs.readFileSync(path.join(dir, 'sim.json'), 'utf8'));
const platformCert = fs.readFileSync(path.join(dir, 'wechatpay_platform_cert.pem'));
const apiv3Key = fs.readFileSync(path.join(dir, 'apiv3.key'));
// the serial the simulator signs its answers under (Wechatpay-Serial): its
// platform certificate's
const platformSerial = sim.serial;
if (new crypto.X509Certificate(platformCert).serialNumber.toUpperCase() !== platformSerial.toUpperCase()) {
  console.log(`FAIL setup: sim.json's serial ${sim.serial} is not the platform certificate's`);
  process.exit(1);
}

const wxpay = new Wechatpay({
  mchid: sim.mchid,
  serial: sim.merchant_serial,
  privateKey: fs.readFileSync(path.join(dir, 'merchant_private_key.pem')),
  certs: { [platformSerial]: platformCert },
  baseURL: `${opt.sim}/`,
});

// The members each answer model marks required (必填), by the page:
// pay.weixin.qq.com/doc/v3/merchant/4012525095 Native下单 (code_url),
// 4012525182 JSAPI下单 (prepay_id), 4012525153 H5下单 (h5_url),
// 4012556352 商户订单号查询订单 and 4013070354 微信支付订单号查询订单 (the
// same answer model: mchid, out_trade_no, trade_state, trade_state_desc;
// appid, and for a paid order transaction_id, trade_type, bank_type,
// success_time, payer.openid, amount.* — what a SUCCESS answer carries, as
// the page's example), 4012552567 申请退款 and 4012556562 查询单笔退款
// (refund_id, out_refund_no, transaction_id, out_trade_no, channel,
// user_received_account, create_time, status, amount.{total, refund,
// payer_total, payer_refund, settlement_refund, settlement_total,
// discount_refund, currency}; success_time once SUCCESS), 4012556654 申请
// 交易账单 (hash_type, hash_value, download_url);
// pay.weixin.qq.com/wiki/doc/apiv3/apis/wechatpay5_1.shtml 下载平台证书
// (data[].serial_no, effective_time, expire_time, encrypt_certificate.
// {algorithm, nonce, associated_data, ciphertext}).
const REQUIRED = {
  native: ['code_url'],
  jsapi: ['prepay_id'],
  h5: ['h5_url'],
  query_open: ['appid', 'mchid', 'out_trade_no', 'trade_state', 'trade_state_desc', 'amount.total'],
  query_paid: ['appid', 'mchid', 'out_trade_no', 'transaction_id', 'trade_type', 'trade_state',
    'trade_state_desc', 'bank_type', 'success_time', 'payer.openid', 'amount.total',
    'amount.payer_total', 'amount.currency', 'amount.payer_currency'],
  refund: ['refund_id', 'out_refund_no', 'transaction_id', 'out_trade_no', 'channel',
    'user_received_account', 'create_time', 'status', 'amount.total', 'amount.refund',
    'amount.payer_total', 'amount.payer_refund', 'amount.settlement_refund',
    'amount.settlement_total', 'amount.discount_refund', 'amount.currency'],
  bill: ['hash_type', 'hash_value', 'download_url'],
  certificate: ['serial_no', 'effective_time', 'expire_time', 'encrypt_certificate.algorithm',
    'encrypt_certificate.nonce', 'encrypt_certificate.associated_data',
    'encrypt_certificate.ciphertext'],
};

function missing(obj, names) {
  return names.filter((n) => n.split('.').reduce((o, k) => (o == null ? undefined : o[k]), obj) === undefined);
}

function fail(op, why) {
  console.log(`FAIL ${op}: ${why}`);
  process.exit(1);
}

// One SDK call: its answer (verified by the SDK, or it throws), its
// status as expected, the model's members present.
async function call(op, fn, { status = 200, model } = {}) {
  let res;
  try {
    res = await fn();
  } catch (e) {
    const r = e.response;
    fail(op, r ? `HTTP ${r.status} ${JSON.stringify(r.data)}` : `${e.code || ''} ${e.message}`);
  }
  if (res.status !== status) fail(op, `HTTP ${res.status}, expected ${status}`);
  const lost = model ? missing(res.data, model) : [];
  if (lost.length) fail(op, `the answer lacks ${lost.join(', ')}: ${JSON.stringify(res.data)}`);
  console.log(`ok ${op}${model ? ` (${model.length} required members)` : ''}`);
  return res.data;
}

const stamp = Date.now().toString(36).toUpperCase();
const notifyUrl = 'https://merchant.example/notify/wechatpay';
const order = (no, total, extra = {}) => ({
  appid: sim.appid, mchid: sim.mchid, description: 'SDK conformance', out_trade_no: no,
  notify_url: notifyUrl, amount: { total, currency: 'CNY' }, ...extra,
});

// prepay: Native, JSAPI, H5
const nativeNo = `SDK-N-${stamp}`;
const n1 = await call('create_native', () => wxpay.v3.pay.transactions.native.post(order(nativeNo, 101)), { model: REQUIRED.native });
const n2 = await call('create_native (the same again)', () => wxpay.v3.pay.transactions.native.post(order(nativeNo, 101)), { model: REQUIRED.native });
if (n1.code_url !== n2.code_url) fail('create_native', `the same request answered ${n2.code_url}, first ${n1.code_url}`);
await call('create_jsapi', () => wxpay.v3.pay.transactions.jsapi.post(order(`SDK-J-${stamp}`, 102, { payer: { openid: 'oUpF8uMuAJO_M2pxb1Q9zNjWeS6o' } })), { model: REQUIRED.jsapi });
await call('create_h5', () => wxpay.v3.pay.transactions.h5.post(order(`SDK-H-${stamp}`, 103, {
  scene_info: { payer_client_ip: '203.0.113.7', h5_info: { type: 'Wap' } },
})), { model: REQUIRED.h5 });

// query by out_trade_no: the open order, then a payment payonce's part made
await call('query (open order)', () => wxpay.v3.pay.transactions.outTradeNo._out_trade_no_.get({
  params: { mchid: sim.mchid }, out_trade_no: nativeNo,
}), { model: REQUIRED.query_open });
const payments = fs.readFileSync(path.join(dir, 'payments.jsonl'), 'utf8').split('\n').filter(Boolean)
  .map((l) => JSON.parse(l)).filter((p) => p.channel === 'wechatpay');
if (!payments.length) fail('query', 'no WeChat Pay payment in the simulator to query');
const paid = payments[payments.length - 1];
const byNo = await call('query (paid, by out_trade_no)', () => wxpay.v3.pay.transactions.outTradeNo._out_trade_no_.get({
  params: { mchid: sim.mchid }, out_trade_no: paid.out_trade_no,
}), { model: REQUIRED.query_paid });
if (byNo.transaction_id !== paid.txn || byNo.amount.total !== paid.amount) fail('query', `answered ${JSON.stringify(byNo)} for ${JSON.stringify(paid)}`);
const byId = await call('query_by_id', () => wxpay.v3.pay.transactions.id._transaction_id_.get({
  params: { mchid: sim.mchid }, transaction_id: paid.txn,
}), { model: REQUIRED.query_paid });
if (JSON.stringify(byId) !== JSON.stringify(byNo)) fail('query_by_id', 'not the answer by out_trade_no');

// close: the open Native order (204, an empty body the SDK verified)
await call('close', () => wxpay.v3.pay.transactions.outTradeNo._out_trade_no_.close.post({ mchid: sim.mchid }, {
  out_trade_no: nativeNo,
}), { status: 204 });
const closed = await call('query (closed)', () => wxpay.v3.pay.transactions.outTradeNo._out_trade_no_.get({
  params: { mchid: sim.mchid }, out_trade_no: nativeNo,
}), { model: REQUIRED.query_open });
if (closed.trade_state !== 'CLOSED') fail('close', `the order is ${closed.trade_state} after the close`);

// refund (no notify_url: nothing is notified to payonce) and its query
const refundNo = `SDK-RF-${stamp}`;
const refund = await call('refund', () => wxpay.v3.refund.domestic.refunds.post({
  transaction_id: paid.txn, out_refund_no: refundNo, reason: 'SDK conformance',
  amount: { refund: 1, total: paid.amount, currency: 'CNY' },
}), { model: REQUIRED.refund });
if (refund.status !== 'PROCESSING') fail('refund', `status ${refund.status}`);
const rq = await call('refund_query', () => wxpay.v3.refund.domestic.refunds._out_refund_no_.get({
  out_refund_no: refundNo,
}), { model: [...REQUIRED.refund, 'success_time'] });
if (rq.refund_id !== refund.refund_id) fail('refund_query', 'another refund');

// certificates: each decrypted with the APIv3 key (AEAD_AES_256_GCM), the
// serial its certificate's, the platform's among them
const certs = await call('certificates', () => wxpay.v3.certificates.get());
if (!Array.isArray(certs.data) || !certs.data.length) fail('certificates', 'no data[]');
let platform = false;
for (const c of certs.data) {
  const lost = missing(c, REQUIRED.certificate);
  if (lost.length) fail('certificates', `an item lacks ${lost.join(', ')}`);
  const e = c.encrypt_certificate;
  const pem = Aes.AesGcm.decrypt(e.ciphertext, apiv3Key, e.nonce, e.associated_data);
  const x = new crypto.X509Certificate(pem);
  if (x.serialNumber.toUpperCase() !== c.serial_no.toUpperCase()) fail('certificates', `serial ${c.serial_no} is not its certificate's ${x.serialNumber}`);
  platform = platform || x.serialNumber.toUpperCase() === platformSerial.toUpperCase();
}
if (!platform) fail('certificates', 'the platform certificate is not among them');
console.log(`ok certificates decrypted (${certs.data.length}, the platform's among them)`);

// the trade bill of today (Beijing time) and its download, gzip, the hash
// checked over the inflated file
const today = new Date(Date.now() + 8 * 3600e3).toISOString().slice(0, 10);
const bill = await call('bill', () => wxpay.v3.bill.tradebill.get({
  params: { bill_date: today, bill_type: 'ALL', tar_type: 'GZIP' },
}), { model: REQUIRED.bill });
const token = new URL(bill.download_url).searchParams.get('token');
const file = await call('bill_download', () => wxpay.v3.billdownload.file.get({
  params: { token }, responseType: 'arraybuffer',
}));
const csv = zlib.gunzipSync(Buffer.from(file));
const sha1 = crypto.createHash('sha1').update(csv).digest('hex');
if (bill.hash_type !== 'SHA1' || sha1 !== bill.hash_value.toLowerCase()) fail('bill_download', `SHA-1 ${sha1}, the bill said ${bill.hash_value}`);
if (!csv.toString('utf8').includes(paid.txn)) fail('bill_download', `the bill has no row for ${paid.txn}`);
console.log(`ok bill_download hash checked (${csv.length} bytes)`);
