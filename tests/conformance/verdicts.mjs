// verdicts.mjs FILE OP,OP,… — the judge's verdicts (judge.mjs): every
// operation named must have been seen at least once, and every request
// judged must conform. Prints one line per operation; exit 0 when all hold.
import fs from 'node:fs';

const [file, expect] = process.argv.slice(2);
const lines = fs.existsSync(file) ? fs.readFileSync(file, 'utf8').split('\n').filter(Boolean) : [];
const byOp = new Map();
for (const line of lines) {
  const v = JSON.parse(line);
  if (!byOp.has(v.op)) byOp.set(v.op, []);
  byOp.get(v.op).push(v);
}
let bad = 0;
for (const op of (expect || '').split(',').filter(Boolean)) {
  const vs = byOp.get(op) || [];
  if (vs.length === 0) {
    console.log(`MISSING ${op}: payonce never made this call`);
    bad++;
  }
}
for (const [op, vs] of [...byOp.entries()].sort()) {
  const wrong = vs.filter((v) => !v.ok);
  console.log(`${wrong.length ? 'REFUSED' : 'ok'} ${op}: ${vs.length} request(s), ${wrong.length} not conforming; checked ${[...new Set(vs.flatMap((v) => v.checked))].join(', ')}`);
  for (const v of wrong.slice(0, 5)) console.log(`    ${v.method} ${v.url}: ${v.problems.join('; ')}`);
  bad += wrong.length;
}
process.exit(bad ? 1 : 0);
