// judges/wechatpay.mjs — what WeChat Pay API v3 requires of a request, judged
// with wechatpay-axios-plugin's own code: the Authorization header's
// signature verified with the SDK's Rsa.verify over the SDK's canonical
// message (Formatter.request: METHOD\nURI\nTIMESTAMP\nNONCE\nBODY\n, URI
// being the path with its query), and the headers WeChat Pay's basic rules
// require (User-Agent and Accept: without either the API answers 400
// INVALID_REQUEST "Http头缺少Accept或User-Agent"; Content-Type
// application/json on a body).
// Then each operation's request model (the API page's 请求参数: the members
// it requires, their types and bounds), each rule with the page it comes
// from — pay.weixin.qq.com/doc/v3/merchant/…: 4012525095 Native下单,
// 4012525182 JSAPI/小程序下单, 4012525153 H5下单, 4012556352 商户订单号查询
// 订单, 4012556398 关闭订单, 4012552567 申请退款, 4012556562 查询单笔退款,
// 4012556654 申请交易账单; pay.weixin.qq.com/wiki/doc/apiv3/apis/…:
// chapter3_1_8.shtml 下载账单, wechatpay5_1.shtml 下载平台证书.
import fs from 'node:fs';
import path from 'node:path';
import wechatpay from 'wechatpay-axios-plugin';

const { Rsa, Formatter } = wechatpay;

export function context(simDir) {
  const sim = JSON.parse(fs.readFileSync(path.join(simDir, 'sim.json'), 'utf8'));
  return {
    mchid: sim.mchid,
    appid: sim.appid,
    merchantSerial: sim.merchant_serial,
    merchantPublicKey: Rsa.from(
      fs.readFileSync(path.join(simDir, 'merchant_public_key.pem')), Rsa.KEY_TYPE_PUBLIC),
  };
}

// The operation a request is, by its method and path.
const OPS = [
  ['POST', /^\/v3\/pay\/transactions\/native$/, 'create_native'],
  ['POST', /^\/v3\/pay\/transactions\/jsapi$/, 'create_jsapi'],
  ['POST', /^\/v3\/pay\/transactions\/h5$/, 'create_h5'],
  ['GET', /^\/v3\/pay\/transactions\/out-trade-no\/[^/?]+\?/, 'query'],
  ['POST', /^\/v3\/pay\/transactions\/out-trade-no\/[^/?]+\/close$/, 'close'],
  ['POST', /^\/v3\/refund\/domestic\/refunds$/, 'refund'],
  ['GET', /^\/v3\/refund\/domestic\/refunds\/[^/?]+$/, 'refund_query'],
  ['GET', /^\/v3\/certificates$/, 'certificates'],
  ['GET', /^\/v3\/bill\/tradebill\?/, 'bill'],
  ['GET', /^\/v3\/billdownload\/file\?/, 'bill_download'],
];

export function operation(method, url) {
  for (const [m, re, op] of OPS) if (m === method && re.test(url)) return op;
  return 'unknown';
}

// Authorization: WECHATPAY2-SHA256-RSA2048 k="v",… in any order.
function authorization(value) {
  const m = /^WECHATPAY2-SHA256-RSA2048 (.*)$/.exec(value || '');
  if (!m) return null;
  const out = {};
  for (const part of m[1].split(',')) {
    const kv = /^\s*([a-z_]+)="([^"]*)"\s*$/.exec(part);
    if (!kv) return null;
    out[kv[1]] = kv[2];
  }
  return out;
}

// ---- the request models ----

const OUT_TRADE_NO = /^[A-Za-z0-9_\-|*]{6,32}$/; // string[6,32]: digits, letters, _-|* (下单, 查询, 关闭)
const OUT_REFUND_NO = /^[A-Za-z0-9_\-|*@]{1,64}$/; // string[1,64]: digits, letters, _-|*@ (申请退款)
const bytes = (s) => Buffer.byteLength(s, 'utf8');

// A string member: present when required, a string, min..max bytes.
function str(problems, obj, key, where, { required = true, min = 1, max, re } = {}) {
  const v = obj?.[key];
  if (v === undefined || v === null) {
    if (required) problems.push(`${where}${key} is required`);
    return;
  }
  if (typeof v !== 'string') { problems.push(`${where}${key} must be a string, is ${typeof v}`); return; }
  if (bytes(v) < min || (max && bytes(v) > max)) problems.push(`${where}${key} must be ${min}..${max} bytes, is ${bytes(v)}`);
  if (re && !re.test(v)) problems.push(`${where}${key} ${JSON.stringify(v)} breaks ${re}`);
}

// An integer member, at least min (amounts are integers in fen).
function int(problems, obj, key, where, min = 1) {
  const v = obj?.[key];
  if (!Number.isInteger(v)) problems.push(`${where}${key} must be an integer, is ${JSON.stringify(v)}`);
  else if (v < min) problems.push(`${where}${key} must be at least ${min}, is ${v}`);
}

// 通知地址 (下单 notify_url string(255), 申请退款 notify_url string(256)):
// reachable from outside, https, no query string. payonce's tests and the
// simulator listen on loopback over http: taken there only.
function notifyUrl(problems, v, where, max) {
  let u;
  try { u = new URL(v); } catch { problems.push(`${where} is not a URL`); return; }
  const loopback = u.hostname === 'localhost' || u.hostname === '[::1]' || /^127\./.test(u.hostname);
  if (u.protocol !== 'https:' && !(u.protocol === 'http:' && loopback)) problems.push(`${where} must be https (http only on loopback): ${v}`);
  if (u.search || u.hash || v.includes('?')) problems.push(`${where} must not carry a query string: ${v}`);
  if (bytes(v) > max) problems.push(`${where} is over ${max} bytes`);
}

function body(req) {
  try { return JSON.parse(req.body); } catch { return undefined; }
}

// Each operation's model; returns the rules it checked.
const MODELS = {
  // Native下单 (4012525095), JSAPI下单 (4012525182), H5下单 (4012525153):
  // appid string(32), mchid string(32), description string(127),
  // out_trade_no string[6,32], notify_url string(255), amount {total int,
  // currency string(16) "CNY"} required; time_expire rfc3339, attach
  // string(128) optional; JSAPI payer.openid string(128); H5
  // scene_info.payer_client_ip string(45), scene_info.h5_info.type.
  create(req, ctx, problems, kind) {
    const b = body(req);
    if (!b || typeof b !== 'object') { problems.push('the prepay body is not a JSON object'); return []; }
    str(problems, b, 'appid', '', { max: 32 });
    str(problems, b, 'mchid', '', { max: 32 });
    if (b.appid !== ctx.appid) problems.push(`appid ${b.appid} is not the merchant's ${ctx.appid}`);
    if (b.mchid !== ctx.mchid) problems.push(`mchid ${b.mchid} is not ${ctx.mchid}`);
    str(problems, b, 'description', '', { max: 127 });
    str(problems, b, 'out_trade_no', '', { min: 6, max: 32, re: OUT_TRADE_NO });
    str(problems, b, 'notify_url', '', { max: 255 });
    if (typeof b.notify_url === 'string') notifyUrl(problems, b.notify_url, 'notify_url', 255);
    str(problems, b, 'attach', '', { required: false, max: 128 });
    str(problems, b, 'time_expire', '', { required: false, max: 64,
      re: /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?([+-]\d{2}:\d{2}|Z)$/ });
    if (!b.amount || typeof b.amount !== 'object') problems.push('amount is required (an object)');
    else {
      int(problems, b.amount, 'total', 'amount.');
      str(problems, b.amount, 'currency', 'amount.', { required: false, max: 16 });
      if (b.amount.currency !== undefined && b.amount.currency !== 'CNY') problems.push(`amount.currency ${b.amount.currency}: CNY only`);
    }
    const checked = ['model:appid', 'model:mchid', 'model:description', 'model:out_trade_no', 'model:notify_url', 'model:amount'];
    if (kind === 'jsapi') {
      str(problems, b.payer, 'openid', 'payer.', { max: 128 });
      checked.push('model:payer.openid');
    }
    if (kind === 'h5') {
      str(problems, b.scene_info, 'payer_client_ip', 'scene_info.', { max: 45 });
      const t = b.scene_info?.h5_info?.type;
      if (!['iOS', 'Android', 'Wap'].includes(t)) problems.push(`scene_info.h5_info.type must be iOS, Android or Wap, is ${JSON.stringify(t)}`);
      checked.push('model:scene_info');
    }
    return checked;
  },
  // 商户订单号查询订单 (4012556352): path out_trade_no string(32) (6..32),
  // query mchid string(32) required; no body.
  query(req, ctx, problems) {
    const u = new URL(req.url, 'http://x');
    const no = decodeURIComponent(u.pathname.split('/').pop());
    if (!OUT_TRADE_NO.test(no)) problems.push(`path out_trade_no ${no} breaks ${OUT_TRADE_NO}`);
    if (u.searchParams.get('mchid') !== ctx.mchid) problems.push(`query mchid ${u.searchParams.get('mchid')} is not ${ctx.mchid}`);
    if (req.body.length) problems.push('a GET with a body');
    return ['model:out_trade_no', 'model:mchid'];
  },
  // 关闭订单 (4012556398): path out_trade_no string(32); body {mchid}.
  close(req, ctx, problems) {
    const no = decodeURIComponent(req.url.split('/')[5] || '');
    if (!OUT_TRADE_NO.test(no)) problems.push(`path out_trade_no ${no} breaks ${OUT_TRADE_NO}`);
    const b = body(req);
    if (!b || b.mchid !== ctx.mchid) problems.push(`the body's mchid ${b?.mchid} is not ${ctx.mchid}`);
    return ['model:out_trade_no', 'model:mchid'];
  },
  // 申请退款 (4012552567): transaction_id or out_trade_no (one of the
  // two), out_refund_no string(64), amount {refund int, total int,
  // currency "CNY"} required; reason string(80), notify_url string(256).
  refund(req, ctx, problems) {
    const b = body(req);
    if (!b || typeof b !== 'object') { problems.push('the refund body is not a JSON object'); return []; }
    if (!b.transaction_id && !b.out_trade_no) problems.push('transaction_id or out_trade_no is required');
    str(problems, b, 'transaction_id', '', { required: false, max: 32 });
    str(problems, b, 'out_trade_no', '', { required: false, min: 6, max: 32, re: OUT_TRADE_NO });
    str(problems, b, 'out_refund_no', '', { max: 64, re: OUT_REFUND_NO });
    str(problems, b, 'reason', '', { required: false, max: 80 });
    if (b.notify_url !== undefined) notifyUrl(problems, b.notify_url, 'notify_url', 256);
    if (!b.amount || typeof b.amount !== 'object') problems.push('amount is required (an object)');
    else {
      int(problems, b.amount, 'refund', 'amount.');
      int(problems, b.amount, 'total', 'amount.');
      if (b.amount.currency !== 'CNY') problems.push(`amount.currency must be CNY, is ${b.amount.currency}`);
      if (b.amount.refund > b.amount.total) problems.push('amount.refund over amount.total');
    }
    return ['model:out_trade_no|transaction_id', 'model:out_refund_no', 'model:amount', 'model:notify_url'];
  },
  // 查询单笔退款 (4012556562): path out_refund_no string(64).
  refund_query(req, ctx, problems) {
    const no = decodeURIComponent(new URL(req.url, 'http://x').pathname.split('/').pop());
    if (!OUT_REFUND_NO.test(no)) problems.push(`path out_refund_no ${no} breaks ${OUT_REFUND_NO}`);
    return ['model:out_refund_no'];
  },
  // 申请交易账单 (4012556654): bill_date yyyy-MM-DD required; bill_type
  // ALL|SUCCESS|REFUND, tar_type GZIP optional.
  bill(req, ctx, problems) {
    const q = new URL(req.url, 'http://x').searchParams;
    if (!/^\d{4}-\d{2}-\d{2}$/.test(q.get('bill_date') || '')) problems.push(`bill_date ${q.get('bill_date')} is not yyyy-MM-DD`);
    if (q.has('bill_type') && !['ALL', 'SUCCESS', 'REFUND'].includes(q.get('bill_type'))) problems.push(`bill_type ${q.get('bill_type')}`);
    if (q.has('tar_type') && q.get('tar_type') !== 'GZIP') problems.push(`tar_type ${q.get('tar_type')}`);
    return ['model:bill_date', 'model:bill_type', 'model:tar_type'];
  },
  // 下载账单 (chapter3_1_8): the download_url as the bill's answer gave it
  // (its token), signed like every request.
  bill_download(req, ctx, problems) {
    if (!new URL(req.url, 'http://x').searchParams.get('token')) problems.push('no token');
    return ['model:token'];
  },
  // 下载平台证书 (wechatpay5_1): a GET without parameters or body.
  certificates(req, ctx, problems) {
    if (req.body.length || req.url.includes('?')) problems.push('certificates takes no parameters');
    return ['model:none'];
  },
};

export function request(req, ctx) {
  const problems = [];
  const checked = [];
  const op = operation(req.method, req.url);
  if (op === 'unknown') problems.push(`not a WeChat Pay API v3 call payonce makes: ${req.method} ${req.url}`);
  const h = req.headers;
  checked.push('user-agent');
  if (!h['user-agent'] || !h['user-agent'].trim()) problems.push('no User-Agent (WeChat Pay answers 400 INVALID_REQUEST)');
  checked.push('accept');
  if (!h.accept || !h.accept.trim()) problems.push('no Accept (WeChat Pay answers 400 INVALID_REQUEST)');
  else if (op !== 'bill_download' && !/application\/json|\*\/\*/.test(h.accept)) problems.push(`Accept ${h.accept} does not take application/json`);
  if (req.body.length) {
    checked.push('content-type');
    if (!/^application\/json/.test(h['content-type'] || '')) problems.push(`a body sent as ${h['content-type']}, not application/json`);
    try {
      JSON.parse(req.body);
    } catch (e) {
      problems.push(`the body is not JSON: ${e.message}`);
    }
  }
  checked.push('authorization');
  const a = authorization(h.authorization);
  if (!a) {
    problems.push(`Authorization is not WECHATPAY2-SHA256-RSA2048 k="v",…: ${h.authorization}`);
  } else {
    for (const k of ['mchid', 'serial_no', 'timestamp', 'nonce_str', 'signature']) {
      if (!a[k]) problems.push(`Authorization lacks ${k}`);
    }
    if (a.mchid && a.mchid !== ctx.mchid) problems.push(`Authorization mchid ${a.mchid}, the merchant is ${ctx.mchid}`);
    if (a.serial_no && a.serial_no !== ctx.merchantSerial) problems.push(`Authorization serial_no ${a.serial_no}, the merchant certificate's is ${ctx.merchantSerial}`);
    const skew = Math.abs(Date.now() / 1000 - Number(a.timestamp));
    if (!(skew <= 300)) problems.push(`Authorization timestamp ${a.timestamp} is ${skew}s away`);
    if (a.signature) {
      // the SDK's canonical message, over exactly what was sent
      const message = Formatter.request(req.method, req.url, a.timestamp, a.nonce_str, req.body);
      if (!Rsa.verify(message, a.signature, ctx.merchantPublicKey)) {
        problems.push('the signature does not verify over Formatter.request(method, uri, timestamp, nonce, body)');
      }
    }
  }
  const model = op.startsWith('create_') ? (r, c, p) => MODELS.create(r, c, p, op.slice(7)) : MODELS[op];
  if (model) checked.push(...model(req, ctx, problems));
  return { op, problems, checked };
}
