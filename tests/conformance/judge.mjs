// judge.mjs — the channel's own SDK judges what payonce sends (issue 43
// item 2a). A recording proxy on loopback between payonce and the channel
// simulator: every request payonce makes to the channel's API is captured
// whole (method, path with query, every header, the raw body), judged by
// the channel's judge (judges/<channel>.mjs: the SDK's own canonical
// message, signature and encoding logic), written as one JSON line to the
// verdicts file, and then forwarded unchanged to the simulator, whose
// answer goes back to payonce unchanged. The proxy never fixes or refuses a
// request: a wrong one reaches the simulator as it would reach the channel.
//
//   node judge.mjs --channel wechatpay|alipay|stripe --upstream http://127.0.0.1:PORT
//                  --sim-dir DIR --verdicts FILE [--listen PORT]
// prints "judge listening on port N" once it listens; stops on SIGTERM or
// after --max-seconds (default 600).
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));

function args(argv) {
  const out = { listen: '0', 'max-seconds': '600' };
  for (let i = 2; i < argv.length; i += 2) {
    if (!argv[i].startsWith('--') || argv[i + 1] === undefined) {
      throw new Error(`judge: bad arguments near ${argv[i]}`);
    }
    out[argv[i].slice(2)] = argv[i + 1];
  }
  for (const k of ['channel', 'upstream', 'sim-dir', 'verdicts']) {
    if (!out[k]) throw new Error(`judge: --${k} is required`);
  }
  return out;
}

const opt = args(process.argv);
const judge = await import(path.join(here, 'judges', `${opt.channel}.mjs`));
const ctx = judge.context(opt['sim-dir']);
const upstream = new URL(opt.upstream);
const BODY_MAX = 1024 * 1024;

const server = http.createServer((req, res) => {
  const chunks = [];
  let size = 0;
  req.on('data', (c) => {
    size += c.length;
    if (size <= BODY_MAX) chunks.push(c);
  });
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    const captured = {
      method: req.method,
      url: req.url,
      // as sent: names lower-cased by Node, values untouched
      headers: req.headers,
      rawHeaders: req.rawHeaders,
      body: body.toString('utf8'),
    };
    let verdict;
    try {
      verdict = judge.request(captured, ctx);
    } catch (e) {
      verdict = { op: 'unknown', problems: [`the judge failed: ${e.stack || e}`] };
    }
    fs.appendFileSync(opt.verdicts, JSON.stringify({
      op: verdict.op,
      ok: verdict.problems.length === 0,
      problems: verdict.problems,
      checked: verdict.checked || [],
      method: req.method,
      url: req.url,
      user_agent: req.headers['user-agent'] || null,
      at: Date.now(),
    }) + '\n');
    // Host as payonce sent it (the judge's), and X-Forwarded-Host too: the
    // simulator builds the URLs it hands out (a bill's download URL) from
    // them, as a channel does from its own origin, so payonce's download
    // comes back through the judge as well
    const headers = { ...req.headers, 'x-forwarded-host': req.headers.host };
    const fwd = http.request({
      host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers,
    }, (up) => {
      res.writeHead(up.statusCode, up.headers);
      up.pipe(res);
    });
    fwd.on('error', (e) => {
      res.writeHead(502, { 'content-type': 'text/plain' });
      res.end(`judge: upstream ${e.message}`);
    });
    fwd.end(body);
  });
});

server.listen(Number(opt.listen), '127.0.0.1', () => {
  console.log(`judge listening on port ${server.address().port}`);
});
const stop = () => server.close(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
setTimeout(() => process.exit(0), Number(opt['max-seconds']) * 1000).unref();
