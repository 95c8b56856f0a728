// Runs the dashboard page's own script (served by rilld at /ui) in Node against the live server, with a minimal
// DOM: its tables must fill with live numbers from /api/*, and its state must match what the load produced.
// Usage: node dashboard_test.mjs http://HOST:PORT EXPECTED_RECORDS
const [base, expectedText] = process.argv.slice(2);
const expected = Number(expectedText);
const page = await (await fetch(`${base}/ui`)).text();
const script = page.match(/<script>([\s\S]*)<\/script>/)[1];

const elements = new Map();
const element = key => {
  if (!elements.has(key)) elements.set(key, { innerHTML: "", textContent: "" });
  return elements.get(key);
};
const document = { querySelector: sel => element(sel), getElementById: id => element(`#${id}`) };
const window = {};
const timers = [];
const run = new Function("document", "window", "fetch", "performance", "setTimeout", script);
run(document, window, path => fetch(`${base}${path}`), performance, (f, ms) => timers.push([f, ms]));

const fail = message => { console.error(`FAIL: ${message}`); process.exit(1); };
const state = () => window.rillState;
const settle = async () => { for (let i = 0; i < 50 && timers.length === 0; ++i) await new Promise(r => setTimeout(r, 20)); };
await settle();
if (timers.length !== 1 || timers[0][1] !== 1000) fail("the page samples again a second after each sample");
await new Promise(r => setTimeout(r, 300));
await timers[0][0]();  // a second sample: rates between the two
for (let i = 0; i < 50 && timers.length < 2; ++i) await new Promise(r => setTimeout(r, 20));
if (timers.length !== 2) fail("the page did not schedule its next sample");
const s = state();
if (s.error) fail(`the page reports an error: ${s.error}`);
if (s.samples < 2) fail(`samples: ${s.samples}`);
if (s.shards.length !== 2) fail(`shards: ${s.shards.length}`);
const total = s.partitions.reduce((n, p) => n + p.high_watermark, 0);
if (total !== expected) fail(`high watermarks add up to ${total}, expected ${expected}`);
if (!s.actors.some(a => a.kind === "partition")) fail("no partition actor");
const partitions = element("#partitions tbody").innerHTML;
for (const p of s.partitions) {
  if (!partitions.includes(`<td class="l">${p.key}</td><td>${p.high_watermark}</td>`)) fail(`row of ${p.key}`);
}
if (!partitions.includes("<svg class=\"spark\"")) fail("no sparkline");
if (!element("#shards tbody").innerHTML.includes("%</td>")) fail("shard load");
if (!element("#actors tbody").innerHTML.includes("partition")) fail("busiest actors");
if (!element("#mailboxes tbody").innerHTML.includes("<polyline")) fail("mailbox history");
if (!element("#status").textContent.includes("2 shards")) fail(`status: ${element("#status").textContent}`);
console.log(`dashboard: ${s.samples} samples, ${s.actors.length} actors, ${s.partitions.length} partitions, ${total} records`);
