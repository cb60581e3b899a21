// stripe_dts.mjs — stripe-node's own type declarations (node_modules/stripe/
// cjs/resources/*.d.ts and shared.d.ts) read as the model of Stripe's API:
// what members a resource carries (those without `?` are required in
// every answer), what parameters a method takes (its XxxParams interface,
// nested interfaces and type aliases in the namespace of the same name),
// and stripe-node's own form encoder (utils.js queryStringifyRequestData,
// which encodes both POST bodies and GET query strings). Used by the
// judge (judges/stripe.mjs) and the SDK's calls against the simulator
// (sdk/stripe.mjs).
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
export const STRIPE_DIR = path.join(here, 'node_modules', 'stripe');
const require = createRequire(path.join(STRIPE_DIR, 'cjs', 'utils.js'));
// stripe-node's encoder (its package exports hide it; the file is its own)
export const { queryStringifyRequestData } = require('./utils.js');
export const { ApiVersion } = require('./apiVersion.js');
export const PACKAGE_VERSION = JSON.parse(
  fs.readFileSync(path.join(STRIPE_DIR, 'package.json'), 'utf8')).version;

const cache = new Map();
function text(file) {
  if (!cache.has(file)) {
    cache.set(file, fs.readFileSync(path.join(STRIPE_DIR, 'cjs', file), 'utf8')
      // comments out: /** … */ and // …
      .replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, ''));
  }
  return cache.get(file);
}

// The body between the brace at `open` and its match.
function block(src, open) {
  let depth = 0;
  for (let i = open; i < src.length; i++) {
    if (src[i] === '{') depth++;
    else if (src[i] === '}' && --depth === 0) return src.slice(open + 1, i);
  }
  throw new Error('unbalanced braces in a stripe-node declaration');
}

// Members at the top level of a body: [{name, optional, type}].
function membersOf(body) {
  const out = [];
  let depth = 0;
  let cur = '';
  for (const ch of body) {
    if (ch === '{' || ch === '<' || ch === '(') depth++;
    if (ch === '}' || ch === '>' || ch === ')') depth--;
    if (ch === ';' && depth === 0) {
      const m = /^\s*(?:readonly\s+)?(\w+)(\??):\s*([\s\S]+)$/.exec(cur);
      if (m) out.push({ name: m[1], optional: m[2] === '?', type: m[3].trim() });
      cur = '';
    } else {
      cur += ch;
    }
  }
  return out;
}

// A namespace's body in file (NAME), or null.
function namespace(file, name) {
  const src = text(file);
  const re = new RegExp(`(?:export )?declare namespace ${name} \\{|^\\s*namespace ${name} \\{`, 'm');
  const m = re.exec(src);
  return m ? block(src, m.index + m[0].length - 1) : null;
}

// The interface NAME (in namespace ns when given) of file:
// {members, extends}; null when it is not there.
export function iface(file, name, ns = null) {
  let src = text(file);
  if (ns) {
    src = namespace(file, ns);
    if (src === null) return null;
  }
  const re = new RegExp(`(?:^|\\n)\\s*(?:export )?interface ${name}(?: extends ([\\w., <>]+))? \\{`);
  const m = re.exec(src);
  if (!m) return null;
  return {
    members: membersOf(block(src, m.index + m[0].length - 1)),
    extends: m[1] ? m[1].split(',').map((s) => s.trim()) : [],
  };
}

// A type alias NAME in namespace ns of file, or null.
export function alias(file, name, ns) {
  const src = ns ? namespace(file, ns) : text(file);
  if (src === null) return null;
  const m = new RegExp(`(?:^|\\n)\\s*(?:export )?type ${name} = ([^;]+);`).exec(src);
  return m ? m[1].trim() : null;
}

// Every member of a resource interface, those of what it extends
// included (EventBase for events).
export function resourceMembers(file, name) {
  const i = iface(file, name);
  if (!i) throw new Error(`stripe-node declares no ${name} in ${file}`);
  let out = [...i.members];
  for (const e of i.extends) out = out.concat(resourceMembers(file, e));
  return out;
}

// The members of an answer object that stripe-node declares required
// (no `?`) and obj lacks, and whether its `object` is the one declared.
export function missingMembers(obj, file, name) {
  const ms = resourceMembers(file, name);
  const problems = [];
  if (!obj || typeof obj !== 'object') return [`not an object: ${JSON.stringify(obj)}`];
  for (const m of ms) {
    if (!m.optional && !(m.name in obj)) problems.push(`${name} lacks ${m.name}`);
  }
  const object = ms.find((m) => m.name === 'object');
  const want = object && /^'([\w.]+)'$/.exec(object.type);
  if (want && obj.object !== want[1]) problems.push(`${name}.object is ${obj.object}, not ${want[1]}`);
  return problems;
}

// A form (POST body or query string) parsed the way Stripe and qs read
// it: a[b]=1 nests, a[0]= / a[]= make arrays; keys in the order sent.
export function parseForm(s) {
  const root = {};
  if (!s) return root;
  for (const part of s.split('&')) {
    const eq = part.indexOf('=');
    if (eq < 0) throw new Error(`a form pair without '=': ${part}`);
    const dec = (x) => decodeURIComponent(x.replace(/\+/g, ' '));
    const key = dec(part.slice(0, eq));
    const val = dec(part.slice(eq + 1));
    const m = /^([^[\]]+)((?:\[[^[\]]*\])*)$/.exec(key);
    if (!m) throw new Error(`a malformed form key: ${key}`);
    const path = [m[1], ...[...m[2].matchAll(/\[([^[\]]*)\]/g)].map((x) => x[1])];
    let node = root;
    for (let i = 0; i < path.length; i++) {
      const k = path[i];
      const last = i === path.length - 1;
      const nextArray = !last && /^\d*$/.test(path[i + 1]);
      if (Array.isArray(node)) {
        const idx = k === '' ? node.length : Number(k);
        if (last) node[idx] = val;
        else node = node[idx] ??= nextArray ? [] : {};
      } else if (last) {
        if (k in node) throw new Error(`the form repeats ${key}`);
        node[k] = val;
      } else {
        node = node[k] ??= nextArray ? [] : {};
      }
    }
  }
  return root;
}

// The params value v (strings, as a form carries them) against the
// declared type t of file's namespace ns: problems into out.
export function checkValue(v, t, where, ctx, out) {
  t = t.replace(/^Emptyable<([\s\S]+)>$/, '$1').trim();
  const alts = splitUnion(t);
  if (alts.length > 1) {
    const tries = alts.map((a) => { const o = []; checkValue(v, a, where, ctx, o); return o; });
    if (!tries.some((o) => o.length === 0)) out.push(...tries.sort((a, b) => a.length - b.length)[0]);
    return;
  }
  let m;
  if (t === 'string' || t === 'OtherString') {
    if (typeof v !== 'string') out.push(`${where}: a string is declared`);
  } else if (t === 'number') {
    if (typeof v !== 'string' || !/^-?\d+(\.\d+)?$/.test(v)) out.push(`${where}: a number is declared, got ${JSON.stringify(v)}`);
  } else if (t === 'boolean') {
    if (v !== 'true' && v !== 'false') out.push(`${where}: a boolean is declared, got ${JSON.stringify(v)}`);
  } else if ((m = /^'(.*)'$/.exec(t))) {
    if (v !== m[1]) out.push(`${where}: '${m[1]}' is declared, got ${JSON.stringify(v)}`);
  } else if (t === 'null') {
    if (v !== '') out.push(`${where}: null (an empty value) is declared`);
  } else if ((m = /^Array<([\s\S]+)>$/.exec(t))) {
    if (!Array.isArray(v)) out.push(`${where}: an array is declared (${where}[0]=…)`);
    else v.forEach((x, i) => checkValue(x, m[1], `${where}[${i}]`, ctx, out));
  } else if (t === 'MetadataParam') {
    if (!v || typeof v !== 'object' || Array.isArray(v)) out.push(`${where}: metadata is a map (${where}[key]=value)`);
  } else {
    const resolved = resolve(t, ctx);
    if (resolved === null) ctx.unjudged.add(t);
    else if (typeof resolved === 'string') checkValue(v, resolved, where, ctx, out);
    else checkObject(v, resolved, where, ctx, out);
  }
}

function splitUnion(t) {
  const parts = [];
  let depth = 0;
  let cur = '';
  for (const ch of t) {
    if ('<({'.includes(ch)) depth++;
    if ('>)}'.includes(ch)) depth--;
    if (ch === '|' && depth === 0) {
      parts.push(cur.trim());
      cur = '';
    } else {
      cur += ch;
    }
  }
  parts.push(cur.trim());
  return parts.filter(Boolean);
}

// A type name: an interface ({members, extends}), an alias (its text),
// or null (not declared where stripe-node keeps them).
function resolve(t, ctx) {
  const [ns, name] = t.includes('.') ? [t.slice(0, t.lastIndexOf('.')), t.slice(t.lastIndexOf('.') + 1)] : [null, t];
  const space = ns ? ns.split('.').pop() : null;
  for (const file of [ctx.file, 'shared.d.ts']) {
    const i = iface(file, name, space);
    if (i) return i;
    const a = alias(file, name, space);
    if (a) return a;
  }
  return null;
}

function checkObject(v, decl, where, ctx, out) {
  if (!v || typeof v !== 'object' || Array.isArray(v)) {
    out.push(`${where}: an object is declared`);
    return;
  }
  let members = [...decl.members];
  for (const e of decl.extends) {
    const r = resolve(e, ctx);
    if (r && typeof r === 'object') members = members.concat(r.members);
  }
  for (const [k, x] of Object.entries(v)) {
    const m = members.find((mm) => mm.name === k);
    const w = where ? `${where}[${k}]` : k;
    if (!m) out.push(`${w}: not a parameter stripe-node declares`);
    else checkValue(x, m.type, w, ctx, out);
  }
  for (const m of members) {
    if (!m.optional && !(m.name in v)) out.push(`${where ? `${where}[${m.name}]` : m.name}: required, missing`);
  }
}

// The parameters of a method (interface NAME of resource file): every
// one declared, of its declared type, the required ones present. Returns
// [problems, types nobody could judge].
export function checkParams(params, file, name) {
  const decl = iface(file, name);
  if (!decl) return [[`stripe-node declares no ${name}`], []];
  const ctx = { file, unjudged: new Set() };
  const out = [];
  checkObject(params, decl, '', ctx, out);
  return [out, [...ctx.unjudged]];
}
