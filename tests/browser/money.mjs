// money.mjs CONSOLE_JS — the console formats money as the command line does
// (issue 45 item 4): console.js's money() against the cases test_core's
// money_for_people holds po_money_format and po_money_format_fine to (the
// same table: amount, finer digits, currency, the text a person reads).
import { readFileSync } from 'node:fs';

const src = readFileSync(process.argv[2], 'utf8');
const m = src.match(/^function money\(amount, cur, fine = 0\) \{[\s\S]*?^\}$/m);
if (!m) { console.log('FAIL money: no function money(amount, cur, fine = 0) in console.js'); process.exit(1); }
const e = src.match(/^const exponent = .*$/m);
if (!e) { console.log('FAIL money: no const exponent = … in console.js'); process.exit(1); }
const money = new Function(`${e[0]}\n${m[0]}; return money;`)();
const cases = [
  // po_money_format (fine 0)
  [1, 0, 'CNY', '0.01 CNY'], [1280, 0, 'CNY', '12.80 CNY'], [-1, 0, 'CNY', '-0.01 CNY'],
  [-100, 0, 'USD', '-1.00 USD'], [0, 0, 'EUR', '0.00 EUR'], [1000, 0, 'JPY', '1000 JPY'],
  [-5, 0, 'KRW', '-5 KRW'], [100000000000000, 0, 'CNY', '1000000000000.00 CNY'],
  // po_money_format_fine: fees in thousandths of the minor unit
  [11000, 3, 'CNY', '0.11 CNY'], [11500, 3, 'CNY', '0.115 CNY'], [11, 3, 'CNY', '0.00011 CNY'],
  [0, 3, 'CNY', '0.00 CNY'], [-8000, 3, 'CNY', '-0.08 CNY'], [1000, 3, 'JPY', '1 JPY'],
  [1500, 3, 'JPY', '1.5 JPY'], [69629000, 3, 'USD', '696.29 USD'], [123456, 6, 'KRW', '0.123456 KRW'],
];
let fails = 0;
for (const [amount, fine, cur, want] of cases) {
  const got = money(amount, cur, fine);
  if (got !== want) { console.log(`FAIL money(${amount}, ${cur}, ${fine}): '${got}', expected '${want}'`); fails++; }
}
if (money(null, 'CNY') !== '-') { console.log('FAIL money(null): not "-"'); fails++; }
console.log(`${cases.length + 1 - fails} passed, ${fails} failed`);
process.exit(fails ? 1 : 0);
