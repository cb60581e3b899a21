// judges/wechatpay.mjs — what WeChat Pay API v3 requires of a request, judged
// with wechatpay-axios-plugin's own code: the Authorization header's
// signature verified with the SDK's Rsa.verify over the SDK's canonical
// message (Formatter.request: METHOD\nURI\nTIMESTAMP\nNONCE\nBODY\n, URI
// being the path with its query), and the headers WeChat Pay's basic rules
// require (User-Agent and Accept: without either the API answers 400
// INVALID_REQUEST "Http头缺少Accept或User-Agent"; Content-Type
// application/json on a body).
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
  return { op, problems, checked };
}
