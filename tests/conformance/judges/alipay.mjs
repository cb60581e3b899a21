// judges/alipay.mjs — what Alipay's open platform gateway (OpenAPI v2,
// gateway.do) requires of a request, judged with alipay-sdk's own code:
//
// * the parameters: alipay-sdk's exec() puts the common ones in the gateway
//   URL's query string (its formatUrl list) and biz_content in the
//   application/x-www-form-urlencoded body; page / wap pay reach the
//   gateway from the buyer's browser (pageExecute's form or GET URL) with
//   the same parameters;
// * the signature: alipay-sdk's util.sign() run over exactly the parameters
//   payonce sent (its timestamp included, biz_content as the object the SDK
//   would serialise) with the app's private key (sim/merchant_private_key.pem)
//   must give the same parameter set and the same sign; in certificate mode
//   the SDK computes app_cert_sn and alipay_root_cert_sn itself from the
//   certificates (antcertutil.getSN), so the SNs payonce sends are judged by
//   the SDK's algorithm;
// * the common parameters' rules (Alipay's 公共请求参数: app_id, method,
//   charset utf-8, sign_type RSA2, timestamp "yyyy-MM-dd HH:mm:ss" in
//   Beijing time, version 1.0, format JSON when given) and each method's
//   biz_content rules from Alipay's published request models (cited at
//   BIZ below);
// * the headers an HTTP client sends (User-Agent; Accept on the API
//   calls), as the SDK's own requests carry them.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
// alipay-sdk's package exports only its client; its signing and
// certificate code is imported from the files themselves.
const dist = path.join(here, '..', 'node_modules', 'alipay-sdk', 'dist', 'esm');
const { sign } = await import(pathToFileURL(path.join(dist, 'util.js')).href);
const { getSN } = await import(pathToFileURL(path.join(dist, 'antcertutil.js')).href);

// sim keys writes these in every mode; the certificates' SNs judge a
// request that carries app_cert_sn (certificate mode).
export function context(simDir) {
  const sim = JSON.parse(fs.readFileSync(path.join(simDir, 'sim.json'), 'utf8'));
  const file = (n) => path.join(simDir, n);
  const ctx = {
    appId: sim.app_id,
    privateKey: fs.readFileSync(file('merchant_private_key.pem'), 'utf8'),
  };
  if (fs.existsSync(file('appCertPublicKey.crt')) && fs.existsSync(file('alipayRootCert.crt'))) {
    ctx.appCertSn = getSN(fs.readFileSync(file('appCertPublicKey.crt')), false);
    ctx.rootCertSn = getSN(fs.readFileSync(file('alipayRootCert.crt')), true);
  }
  return ctx;
}

const METHODS = {
  'alipay.trade.precreate': 'precreate',
  'alipay.trade.page.pay': 'page_pay',
  'alipay.trade.wap.pay': 'wap_pay',
  'alipay.trade.query': 'query',
  'alipay.trade.close': 'close',
  'alipay.trade.refund': 'refund',
  'alipay.trade.fastpay.refund.query': 'refund_query',
  'alipay.data.dataservice.bill.downloadurl.query': 'bill_url',
};
// alipay-sdk's formatUrl: the parameters it sends in the URL.
const URL_ARGS = new Set(['app_id', 'method', 'format', 'charset', 'sign_type', 'sign', 'timestamp',
  'version', 'notify_url', 'return_url', 'auth_token', 'app_auth_token', 'app_cert_sn',
  'alipay_root_cert_sn', 'ws_service_url']);
// the payments Alipay notifies: the request says where (payonce creates a
// payment only with the account's notify URL); a refund may name one too
const NOTIFIED = new Set(['precreate', 'page_pay', 'wap_pay']);

const YUAN = /^(0|[1-9][0-9]{0,8})\.[0-9]{2}$/;
const TIME = /^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}$/;
const chars = (s) => [...s].length;
function yuan(v, what, p) {
  if (typeof v !== 'string' || !YUAN.test(v)) {
    p.push(`${what} ${JSON.stringify(v)} is not yuan with two decimals`);
  } else if (Number(v.replace('.', '')) < 1 || Number(v.replace('.', '')) > 10000000000) {
    p.push(`${what} ${v} is outside [0.01, 100000000.00]`);
  }
}
function str(v, what, max, p, required = true) {
  if (v === undefined && !required) return;
  if (typeof v !== 'string' || v.length === 0) p.push(`${what} is required (a string)`);
  else if (chars(v) > max) p.push(`${what} is ${chars(v)} characters, at most ${max}`);
}
function tradeRef(b, p) { // out_trade_no or trade_no: 二选一 (either names the trade)
  if (b.out_trade_no === undefined && b.trade_no === undefined) p.push('neither out_trade_no nor trade_no');
  str(b.out_trade_no, 'out_trade_no', 64, p, false);
  str(b.trade_no, 'trade_no', 64, p, false);
}

// biz_content per method, from Alipay's request models (opendocs
// alipay.trade.precreate 02ekfg, page.pay 028r8t, wap.pay 02ivbs, query
// 02ekfh, close 02o6e7, refund 02ekfk, fastpay.refund.query 02ekfl,
// data.dataservice.bill.downloadurl.query 02e7gr): the required fields,
// their bounds and formats.
const BIZ = {
  precreate(b, p) {
    str(b.out_trade_no, 'out_trade_no', 64, p);
    yuan(b.total_amount, 'total_amount', p);
    str(b.subject, 'subject', 256, p);
    if (b.time_expire !== undefined && !TIME.test(b.time_expire)) p.push(`time_expire ${b.time_expire} is not yyyy-MM-dd HH:mm:ss`);
  },
  page_pay(b, p) {
    BIZ.precreate(b, p);
    if (b.product_code !== 'FAST_INSTANT_TRADE_PAY') p.push(`product_code ${b.product_code}: page pay's is FAST_INSTANT_TRADE_PAY`);
  },
  wap_pay(b, p) {
    BIZ.precreate(b, p);
    if (b.product_code !== 'QUICK_WAP_WAY') p.push(`product_code ${b.product_code}: wap pay's is QUICK_WAP_WAY`);
  },
  query: tradeRef,
  close: tradeRef,
  refund(b, p) {
    tradeRef(b, p);
    yuan(b.refund_amount, 'refund_amount', p);
    // 同一笔交易多次退款需要保证唯一，如需部分退款，则此参数必传: payonce
    // refunds partially, so always
    str(b.out_request_no, 'out_request_no', 64, p);
  },
  refund_query(b, p) {
    tradeRef(b, p);
    str(b.out_request_no, 'out_request_no', 64, p);
  },
  bill_url(b, p) {
    if (b.bill_type !== 'trade' && b.bill_type !== 'signcustomer') p.push(`bill_type ${b.bill_type}: trade or signcustomer`);
    if (!/^[0-9]{4}-[0-9]{2}(-[0-9]{2})?$/.test(b.bill_date || '')) p.push(`bill_date ${b.bill_date}: yyyy-MM-dd or yyyy-MM`);
  },
};

// now in Beijing time, "yyyy-MM-dd HH:mm:ss"
function beijing(ms) {
  return new Date(ms + 8 * 3600 * 1000).toISOString().slice(0, 19).replace('T', ' ');
}

function parseForm(text, where, into, p) {
  for (const [k, v] of new URLSearchParams(text)) {
    if (k in into) p.push(`${k} sent twice (${into[k].where} and ${where})`);
    into[k] = { v, where };
  }
}

export function request(req, ctx) {
  const problems = [];
  const checked = [];
  const h = req.headers;
  const u = new URL(req.url, 'http://judge');
  checked.push('user-agent');
  if (!h['user-agent'] || !h['user-agent'].trim()) problems.push('no User-Agent');
  if (u.pathname === '/alipay/downloadBillFile') {
    // the bill's URL is the one the signed bill_url answer gave: a plain GET
    if (req.method !== 'GET') problems.push(`the bill is downloaded with ${req.method}, not GET`);
    if (!u.searchParams.get('bizDates')) problems.push('not the URL the bill answer gave (bizDates)');
    return { op: 'bill_download', problems, checked };
  }
  if (u.pathname !== '/gateway.do') {
    problems.push(`not a gateway call: ${req.method} ${req.url}`);
    return { op: 'unknown', problems, checked };
  }
  const all = {};
  parseForm(u.search.slice(1), 'the URL', all, problems);
  if (req.body.length) {
    checked.push('content-type');
    if (!/^application\/x-www-form-urlencoded/.test(h['content-type'] || '')) {
      problems.push(`a body sent as ${h['content-type']}, not application/x-www-form-urlencoded`);
    }
    parseForm(req.body, 'the body', all, problems);
  }
  const val = (k) => (all[k] ? all[k].v : undefined);
  const method = val('method');
  const op = METHODS[method] || 'unknown';
  if (op === 'unknown') {
    problems.push(`method ${method}: not an Alipay method payonce calls`);
    return { op, problems, checked };
  }
  const browser = op === 'page_pay' || op === 'wap_pay';
  if (!browser) {
    checked.push('accept');
    if (!h.accept || !/application\/json|\*\/\*/.test(h.accept)) problems.push(`Accept ${h.accept} does not take application/json`);
    if (req.method !== 'POST') problems.push(`${op} sent with ${req.method}: the gateway's API calls are POSTed`);
    // where alipay-sdk's exec() puts each parameter
    checked.push('url-or-body');
    for (const [k, { where }] of Object.entries(all)) {
      const want = URL_ARGS.has(k) ? 'the URL' : 'the body';
      if (where !== want) problems.push(`${k} in ${where}: alipay-sdk sends it in ${want}`);
    }
  }
  checked.push('common-parameters');
  for (const k of ['app_id', 'method', 'charset', 'sign_type', 'sign', 'timestamp', 'version', 'biz_content']) {
    if (!val(k)) problems.push(`${k} missing (a required common parameter)`);
  }
  if (val('app_id') && val('app_id') !== ctx.appId) problems.push(`app_id ${val('app_id')}, the app is ${ctx.appId}`);
  if (val('charset') && val('charset') !== 'utf-8') problems.push(`charset ${val('charset')}, not utf-8`);
  if (val('sign_type') && val('sign_type') !== 'RSA2') problems.push(`sign_type ${val('sign_type')}, not RSA2`);
  if (val('version') && val('version') !== '1.0') problems.push(`version ${val('version')}, not 1.0`);
  if (val('format') !== undefined && val('format') !== 'JSON') problems.push(`format ${val('format')}, only JSON`);
  const ts = val('timestamp') || '';
  if (!TIME.test(ts)) {
    problems.push(`timestamp ${ts} is not yyyy-MM-dd HH:mm:ss`);
  } else {
    const skew = Math.abs(Date.parse(`${ts.replace(' ', 'T')}+08:00`) - Date.now()) / 1000;
    if (!(skew <= 600)) problems.push(`timestamp ${ts} is ${Math.round(skew)} s from now in Beijing time (${beijing(Date.now())})`);
  }
  if (NOTIFIED.has(op) || val('notify_url') !== undefined) {
    checked.push('notify_url');
    if (!/^https?:\/\//.test(val('notify_url') || '')) problems.push(`notify_url ${val('notify_url')}: ${op} needs where to notify, an http(s) URL`);
  }
  // biz_content: JSON as the SDK writes it (JSON.stringify of the object)
  checked.push('biz_content');
  let biz = null;
  try {
    biz = JSON.parse(val('biz_content') || '');
  } catch (e) {
    problems.push(`biz_content is not JSON: ${e.message}`);
  }
  if (biz && (typeof biz !== 'object' || Array.isArray(biz))) {
    problems.push('biz_content is not a JSON object');
    biz = null;
  }
  if (biz) {
    if (JSON.stringify(biz) !== val('biz_content')) problems.push(`biz_content is not the text alipay-sdk sends for it: ${val('biz_content')}`);
    BIZ[op](biz, problems);
  }
  // certificate mode: the SNs the SDK computes from the certificates
  const certMode = val('app_cert_sn') !== undefined || val('alipay_root_cert_sn') !== undefined;
  if (certMode) {
    checked.push('cert-sn');
    if (!ctx.appCertSn) problems.push('app_cert_sn sent, but the app has no certificate');
    else if (val('app_cert_sn') !== ctx.appCertSn) problems.push(`app_cert_sn ${val('app_cert_sn')}, the SDK's is ${ctx.appCertSn}`);
    if (ctx.rootCertSn && val('alipay_root_cert_sn') !== ctx.rootCertSn) problems.push(`alipay_root_cert_sn ${val('alipay_root_cert_sn')}, the SDK's is ${ctx.rootCertSn}`);
  }
  // the SDK's own sign() over the same parameters
  if (biz && val('sign')) {
    checked.push('sign');
    const config = {
      appId: val('app_id'), charset: val('charset'), version: val('version'),
      signType: val('sign_type'), privateKey: ctx.privateKey,
    };
    if (certMode && ctx.appCertSn) {
      config.appCertSn = ctx.appCertSn;
      config.alipayRootCertSn = ctx.rootCertSn;
    }
    const common = new Set(['sign', 'method', 'app_id', 'charset', 'version', 'sign_type',
      'biz_content', 'app_cert_sn', 'alipay_root_cert_sn']);
    const params = { bizContent: biz };
    for (const [k, { v }] of Object.entries(all)) if (!common.has(k)) params[k] = v;
    let sdk;
    try {
      sdk = sign(method, params, config, { bizContentAutoSnakeCase: false });
    } catch (e) {
      problems.push(`alipay-sdk's sign() refused the parameters: ${e.message}`);
    }
    if (sdk) {
      const mine = Object.keys(all).sort().join(',');
      const its = Object.keys(sdk).sort().join(',');
      if (mine !== its) problems.push(`the parameters are ${mine}; alipay-sdk's for them: ${its}`);
      for (const k of Object.keys(sdk)) {
        if (k !== 'sign' && all[k] && all[k].v !== sdk[k]) problems.push(`${k} ${all[k].v}, alipay-sdk's ${sdk[k]}`);
      }
      if (sdk.sign !== val('sign')) problems.push('sign is not alipay-sdk\'s sign() over the same parameters with the app key');
    }
  }
  return { op, problems, checked };
}
