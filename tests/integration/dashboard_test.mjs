// Runs the dashboard page's own script (served by rilld at /ui) in Node against the live server, with a minimal
// DOM: its tables must fill with live numbers from /api/*, and its state must match what the load produced.
// (uPlot is not loaded here: the page draws its charts only where the library is; its history is kept either way.)
// Usage: node dashboard_test.mjs http://HOST:PORT BENCH_RECORDS STREAM/TOPIC GROUP LAG
const [base, expectedText, topicName, groupName, lagText] = process.argv.slice(2);
const expected = Number(expectedText);
const lagExpected = Number(lagText);
const page = await (await fetch(`${base}/ui`)).text();
const script = page.match(/<script>([\s\S]*)<\/script>/)[1];
if (!page.includes('<script src="/ui/uplot.js"></script>')) throw new Error("the page does not load uPlot from rilld");
for (const asset of ["/ui/uplot.js", "/ui/uplot.css"]) {
  const r = await fetch(`${base}${asset}`);
  const body = await r.text();
  if (!r.ok || body.length < 1000) throw new Error(`${asset}: HTTP ${r.status}`);
  // MIT: the copyright and permission notice travel with the copy rilld serves.
  if (asset.endsWith(".js") && !(body.includes("Copyright (c)") && body.includes("Permission is hereby granted"))) {
    throw new Error(`${asset} lacks uPlot's license`);
  }
}
if (/(src|href)="(https?:)?\/\//.test(page)) throw new Error("the page refers to another host");

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
// The overview: totals, topics by name with their groups' lag, the history the charts draw.
const named = s.topics.find(t => `${t.stream_name}/${t.topic_name}` === topicName);
if (!named) fail(`no topic ${topicName} in ${JSON.stringify(s.topics.map(t => t.topic_name))}`);
const group = named.groups.find(g => g.name === groupName);
if (!group || group.lag !== lagExpected) fail(`group ${groupName}: ${JSON.stringify(named.groups)}`);
const bench = s.topics.filter(t => t !== named).reduce((n, t) => n + t.records, 0);
if (bench !== expected) fail(`the bench topics hold ${bench} records, expected ${expected}`);
if (s.totals.records !== expected + named.records) fail(`total messages ${s.totals.records}`);
if (s.totals.streams !== 2 || s.totals.topics !== 2) fail(`totals: ${JSON.stringify(s.totals)}`);
const topics = element("#topics tbody").innerHTML;
const [streamName, topicOnly] = topicName.split("/");
if (!topics.includes(`<tr data-topic="${topicName}">`)) fail(`no row of ${topicName}`);
if (!topics.includes(`<span class="name topic">${topicOnly}</span>`) || !topics.includes(streamName)) fail("topic name");
if (!topics.includes(`data-lag="${lagExpected}"`)) fail(`no lag ${lagExpected} in the topics table`);
// A node alone says so, on its cluster tab too.
if (!s.cluster || s.cluster.role !== "alone") fail(`cluster: ${JSON.stringify(s.cluster)}`);
if (!element("#cluster-summary").innerHTML.includes("alone")) fail("the cluster tab does not name the role");
const totals = element("#totals").innerHTML;
for (const label of ["streams", "topics", "partitions", "messages", "bytes", "msg/s in", "msg/s out", "connections"]) {
  if (!totals.includes(`<div class="k">${label}</div>`)) fail(`no total ${label}`);
}
if (s.node.time.length !== s.samples || s.node.in.length !== s.samples) fail("chart history");
// The actors and shards view (a tab away).
const total = s.partitions.reduce((n, p) => n + p.high_watermark, 0);
if (total !== expected + named.records) fail(`high watermarks add up to ${total}`);
if (!s.actors.some(a => a.kind === "partition" && a.name.startsWith(`${topicName}/`))) fail("partition actor by name");
const partitions = element("#partitions tbody").innerHTML;
for (const p of s.partitions) {
  if (!partitions.includes(`<td class="l">${p.name}</td><td>${p.high_watermark}</td>`)) fail(`row of ${p.name}`);
}
if (!partitions.includes(`<td class="l">${topicName}/0</td>`)) fail("partitions by name");
if (!partitions.includes("<svg class=\"spark\"")) fail("no sparkline");
if (!element("#shards tbody").innerHTML.includes("%</td>")) fail("shard load");
if (!element("#actors tbody").innerHTML.includes("partition")) fail("busiest actors");
if (!element("#mailboxes tbody").innerHTML.includes("<polyline")) fail("mailbox history");
if (!element("#status").textContent.includes("2 shards")) fail(`status: ${element("#status").textContent}`);
console.log(`dashboard: ${s.samples} samples, ${s.actors.length} actors, ${s.topics.length} topics, ` +
            `${topicName} group ${groupName} lag ${group.lag}`);
