// sdk/alipay.mjs --sim URL --sim-dir DIR — alipay-sdk's own client against
// `payonce sim serve` (issue 43 item 2b): every method payonce uses, called
// the way an integrator calls it (sdk.exec with validateSign, so the SDK
// itself verifies each answer's sign over the raw "<method>_response" text;
// sdk.pageExecute for the browser's page / wap pay), in both of Alipay's
// modes — public key (alipayPublicKey) and public-key certificate (公钥证书,
// appCertContent / alipayPublicCertContent / alipayRootCertContent: the SDK
// computes and sends app_cert_sn and alipay_root_cert_sn, and the answer
// must name Alipay's certificate by alipay_cert_sn). Each answer must carry
// every field Alipay's published response model marks required (REQUIRED
// below, with the model it comes from). Prints "ok <mode> <op>" per call;
// exits 1 at the first failure.
//
// Alipay reads the timestamp as Beijing time and the SDK writes the
// process's local time: an integrator's server runs in Asia/Shanghai (one in
// UTC is refused isv.invalid-timestamp), so this one does too.
process.env.TZ = 'Asia/Shanghai';

const { AlipaySdk } = await import('alipay-sdk');
const fs = await import('node:fs');
const path = await import('node:path');

function args(argv) {
  const out = {};
  for (let i = 2; i < argv.length; i += 2) out[argv[i].replace(/^--/, '')] = argv[i + 1];
  if (!out.sim || !out['sim-dir']) throw new Error('usage: alipay.mjs --sim URL --sim-dir DIR');
  return out;
}
const opt = args(process.argv);
const dir = opt['sim-dir'];
const read = (n) => fs.readFileSync(path.join(dir, n), 'utf8');
const sim = JSON.parse(read('sim.json'));
const gateway = `${opt.sim}/gateway.do`;
// where the simulator would notify the SDK's own trades: nobody listens
const notifyUrl = 'http://127.0.0.1:9/notify/alipay/sdk';

// The fields each method's published response model marks required
// (opendocs.alipay.com: alipay.trade.precreate 02ekfg, alipay.trade.query
// 02ekfq, alipay.trade.refund 02ekfs, alipay.trade.fastpay.refund.query
// 02ekft, alipay.trade.close 02o6e8, bill downloadurl.query 02ekfu; the
// public response parameters code and msg on every answer), and the ones
// asked for by query_options (returned only then).
const REQUIRED = {
  precreate: ['code', 'msg', 'out_trade_no', 'qr_code'],
  query: ['code', 'msg', 'trade_no', 'out_trade_no', 'buyer_logon_id', 'trade_status',
    'total_amount', 'buyer_user_id', 'buyer_pay_amount', 'point_amount', 'invoice_amount',
    'receipt_amount', 'send_pay_date', 'fund_bill_list'],
  close: ['code', 'msg', 'out_trade_no'],
  refund: ['code', 'msg', 'trade_no', 'out_trade_no', 'buyer_logon_id', 'fund_change',
    'refund_fee', 'gmt_refund_pay', 'buyer_user_id'],
  refund_options: ['refund_detail_item_list', 'send_back_fee'],
  refund_query: ['code', 'msg', 'trade_no', 'out_trade_no', 'out_request_no', 'refund_amount',
    'total_amount', 'refund_status'],
  refund_query_options: ['gmt_refund_pay', 'refund_detail_item_list'],
  bill_url: ['code', 'msg', 'bill_download_url'],
  error: ['code', 'msg', 'sub_code', 'sub_msg'],
};

let failed = false;
function check(cond, what) {
  if (!cond) {
    console.log(`FAIL ${what}`);
    failed = true;
    throw new Error(what);
  }
}
function has(res, fields, what) {
  for (const f of fields) check(res[f] !== undefined && res[f] !== '', `${what}: the answer lacks ${f}: ${JSON.stringify(res)}`);
}
const yuan = /^[0-9]+\.[0-9]{2}$/;

// the latest payment the simulator took for Alipay (payments.jsonl), and
// one it has not refunded in full: what the query and the refund are about
function paidTrade() {
  const lines = read('payments.jsonl').split('\n').filter(Boolean).map((l) => JSON.parse(l));
  const mine = lines.filter((p) => p.channel === 'alipay');
  check(mine.length > 0, 'the simulator has an Alipay payment to query (payments.jsonl)');
  return mine[mine.length - 1];
}

async function run(mode, sdk, tag) {
  const ok = (op) => console.log(`ok ${mode} ${op}`);
  const exec = (method, params) => sdk.exec(method, params, { validateSign: true });
  const paid = paidTrade();
  const pre = `SDK-${tag}-PRE`;

  // precreate; the same again (a lost answer retried): the same QR code;
  // other parameters under the same number: ACQ.CONTEXT_INCONSISTENT
  const biz = { out_trade_no: pre, total_amount: '0.88', subject: 'SDK 订单码' };
  let r = await exec('alipay.trade.precreate', { bizContent: biz, notifyUrl });
  check(r.code === '10000', `precreate: ${JSON.stringify(r)}`);
  has(r, REQUIRED.precreate, 'precreate');
  check(r.out_trade_no === pre && /^https:\/\/qr\.alipay\.com\//.test(r.qr_code), `precreate: ${JSON.stringify(r)}`);
  ok('precreate');
  const again = await exec('alipay.trade.precreate', { bizContent: biz, notifyUrl });
  check(again.code === '10000' && again.qr_code === r.qr_code, `precreate again: ${JSON.stringify(again)}`);
  ok('precreate_again_same_qr_code');
  const other = await exec('alipay.trade.precreate', { bizContent: { ...biz, total_amount: '0.89' }, notifyUrl });
  check(other.code === '40004' && other.sub_code === 'ACQ.CONTEXT_INCONSISTENT', `precreate other amount: ${JSON.stringify(other)}`);
  has(other, REQUIRED.error, 'precreate other amount');
  ok('precreate_other_parameters_refused');

  // query: by out_trade_no, by trade_no alone (二选一), an unknown trade
  r = await exec('alipay.trade.query', { bizContent: { out_trade_no: paid.out_trade_no } });
  check(r.code === '10000' && r.trade_status === 'TRADE_SUCCESS', `query: ${JSON.stringify(r)}`);
  has(r, REQUIRED.query, 'query');
  check(r.trade_no === paid.txn && yuan.test(r.total_amount) && Array.isArray(r.fund_bill_list) &&
    r.fund_bill_list.length > 0 && r.fund_bill_list.every((f) => f.fund_channel && yuan.test(f.amount)),
  `query's amounts and fund_bill_list: ${JSON.stringify(r)}`);
  ok('query');
  const byTxn = await exec('alipay.trade.query', { bizContent: { trade_no: paid.txn } });
  check(byTxn.code === '10000' && byTxn.out_trade_no === paid.out_trade_no && byTxn.trade_no === paid.txn, `query by trade_no: ${JSON.stringify(byTxn)}`);
  has(byTxn, REQUIRED.query, 'query by trade_no');
  ok('query_by_trade_no');
  r = await exec('alipay.trade.query', { bizContent: { out_trade_no: `SDK-${tag}-NONE` } });
  check(r.code === '40004' && r.sub_code === 'ACQ.TRADE_NOT_EXIST', `query of no trade: ${JSON.stringify(r)}`);
  has(r, REQUIRED.error, 'query of no trade');
  ok('query_trade_not_exist');

  // close the precreated one; the query then says TRADE_CLOSED
  r = await exec('alipay.trade.close', { bizContent: { out_trade_no: pre } });
  check(r.code === '10000', `close: ${JSON.stringify(r)}`);
  has(r, REQUIRED.close, 'close');
  r = await exec('alipay.trade.query', { bizContent: { out_trade_no: pre } });
  check(r.code === '10000' && r.trade_status === 'TRADE_CLOSED', `query after close: ${JSON.stringify(r)}`);
  ok('close');

  // refund 0.01 of the paid trade; the same request again moves nothing
  const rf = { out_trade_no: paid.out_trade_no, refund_amount: '0.01', out_request_no: `SDK-${tag}-RF`,
    query_options: ['refund_detail_item_list'] };
  r = await exec('alipay.trade.refund', { bizContent: rf });
  check(r.code === '10000' && r.fund_change === 'Y', `refund: ${JSON.stringify(r)}`);
  has(r, [...REQUIRED.refund, ...REQUIRED.refund_options], 'refund');
  check(yuan.test(r.refund_fee) && r.refund_detail_item_list.every((f) => f.fund_channel && yuan.test(f.amount)), `refund: ${JSON.stringify(r)}`);
  ok('refund');
  r = await exec('alipay.trade.refund', { bizContent: rf });
  check(r.code === '10000' && r.fund_change === 'N', `refund again: ${JSON.stringify(r)}`);
  ok('refund_again_no_money_moves');

  // the refund's state
  r = await exec('alipay.trade.fastpay.refund.query', { bizContent: {
    out_trade_no: paid.out_trade_no, out_request_no: rf.out_request_no,
    query_options: ['gmt_refund_pay', 'refund_detail_item_list'] } });
  check(r.code === '10000' && r.refund_status === 'REFUND_SUCCESS' && r.refund_amount === '0.01', `refund query: ${JSON.stringify(r)}`);
  has(r, [...REQUIRED.refund_query, ...REQUIRED.refund_query_options], 'refund query');
  ok('refund_query');

  // today's bill (Beijing time): its URL, and the file (a zip)
  const day = new Date().toLocaleDateString('sv-SE', { timeZone: 'Asia/Shanghai' });
  r = await exec('alipay.data.dataservice.bill.downloadurl.query', { bizContent: { bill_type: 'trade', bill_date: day } });
  check(r.code === '10000', `bill url: ${JSON.stringify(r)}`);
  has(r, REQUIRED.bill_url, 'bill url');
  ok('bill_url');
  const file = await fetch(r.bill_download_url);
  const zip = Buffer.from(await file.arrayBuffer());
  check(file.status === 200 && zip.subarray(0, 4).toString('binary') === 'PK\x03\x04', `bill download: HTTP ${file.status}`);
  ok('bill_download');

  // page pay as a GET URL, wap pay as the self-submitting form: what the
  // buyer's browser does with them reaches the cashier
  const page = { out_trade_no: `SDK-${tag}-PAGE`, product_code: 'FAST_INSTANT_TRADE_PAY', total_amount: '0.66', subject: 'SDK page' };
  const url = sdk.pageExecute('alipay.trade.page.pay', 'GET', { bizContent: page, notifyUrl, returnUrl: 'https://shop.example/return' });
  let res = await fetch(url);
  let html = await res.text();
  check(res.status === 200 && html.includes(page.out_trade_no), `page pay GET: HTTP ${res.status} ${html.slice(0, 200)}`);
  ok('page_pay');
  const wap = { out_trade_no: `SDK-${tag}-WAP`, product_code: 'QUICK_WAP_WAY', total_amount: '0.67', subject: 'SDK wap' };
  const form = sdk.pageExecute('alipay.trade.wap.pay', 'POST', { bizContent: wap, notifyUrl });
  const action = /action="([^"]*)"/.exec(form)[1];
  const body = new URLSearchParams();
  for (const m of form.matchAll(/<input type="hidden" name="([^"]*)" value="([^"]*)" \/>/g)) {
    body.set(m[1], m[2].replace(/&quot;/g, '"'));
  }
  res = await fetch(action, { method: 'POST', body });
  html = await res.text();
  check(res.status === 200 && html.includes(wap.out_trade_no), `wap pay POST: HTTP ${res.status} ${html.slice(0, 200)}`);
  ok('wap_pay');
}

// Certificate mode: the raw answer names the certificate that signed it
// (alipay_cert_sn, which exec() does not hand back), and its sign verifies
// with that certificate's key (the SDK's checkResponseSign on the raw text).
async function certAnswer(sdk) {
  const params = sdk.sdkExecute('alipay.trade.query', { bizContent: { out_trade_no: paidTrade().out_trade_no } });
  const res = await fetch(gateway, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: params });
  const raw = await res.text();
  const doc = JSON.parse(raw);
  check(doc.alipay_cert_sn === sdk.config.alipayCertSn, `cert mode: alipay_cert_sn ${doc.alipay_cert_sn}, the SDK's ${sdk.config.alipayCertSn}`);
  sdk.checkResponseSign(raw, 'alipay_trade_query_response', doc.sign);
  console.log('ok cert answer_names_its_certificate');
}

const common = { appId: sim.app_id, privateKey: read('merchant_private_key.pem'), keyType: 'PKCS8', gateway, camelcase: false };
try {
  await run('key', new AlipaySdk({ ...common, alipayPublicKey: read('alipay_public_key.pem') }), 'K');
  const certSdk = new AlipaySdk({
    ...common,
    appCertContent: read('appCertPublicKey.crt'),
    alipayPublicCertContent: read('alipayCertPublicKey_RSA2.crt'),
    alipayRootCertContent: read('alipayRootCert.crt'),
  });
  await run('cert', certSdk, 'C');
  await certAnswer(certSdk);
} catch (e) {
  if (!failed) console.log(`FAIL ${e.stack || e}`);
  process.exit(1);
}
