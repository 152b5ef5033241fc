// End-to-end check of the servers started by infra/up.sh, with the same client
// libraries the app uses:
//   1. Kafka protocol: ask the broker for its ApiVersions (raw v0 request, no kafkajs)
//      and check that every API kafkajs implements resolves, by kafkajs's own rule
//      min(best implemented, broker max), to a version the broker accepts.
//   2. Kafka data path: create a topic, produce one message, consume it in a group;
//      log the API versions kafkajs actually sent (instrumentation events).
//   3. Cassandra: keyspace + table, INSERT ... IF NOT EXISTS twice (LWT, Paxos):
//      wasApplied() must be true, then false.
// Exit 0 when all pass. Usage: node infra/smoke.mjs [--quiet]
import net from 'node:net';
import { createRequire } from 'node:module';
import { parseArgs } from 'node:util';
import kafkajs from 'kafkajs';
import cassandra from 'cassandra-driver';

const { values: opts } = parseArgs({ options: { quiet: { type: 'boolean', default: false } } });
const say = (...a) => { if (!opts.quiet) console.log(...a); };
const require = createRequire(import.meta.url);
const { Kafka, Partitioners, logLevel } = kafkajs;
const [kHost, kPort] = (process.env.KAFKA_BROKERS ?? '127.0.0.1:9092').split(',')[0].split(':');
const cContact = (process.env.CASSANDRA_CONTACT_POINTS ?? '127.0.0.1:9042').split(',');
const cDc = process.env.CASSANDRA_LOCAL_DC ?? 'datacenter1';
const failures = [];
const check = (ok, what) => { say(`${ok ? 'ok  ' : 'FAIL'} ${what}`); if (!ok) failures.push(what); };

// ---- 1. ApiVersions straight from the broker ---------------------------------------
function brokerApiVersions(host, port) {
  return new Promise((resolve, reject) => {
    const clientId = Buffer.from('infra-smoke');
    const body = Buffer.alloc(2 + 2 + 4 + 2 + clientId.length);
    body.writeInt16BE(18, 0); // api_key ApiVersions
    body.writeInt16BE(0, 2); // api_version 0 (every broker answers v0)
    body.writeInt32BE(1, 4); // correlation_id
    body.writeInt16BE(clientId.length, 8);
    clientId.copy(body, 10);
    const size = Buffer.alloc(4);
    size.writeInt32BE(body.length);
    const sock = net.connect(Number(port), host, () => sock.write(Buffer.concat([size, body])));
    let buf = Buffer.alloc(0);
    sock.setTimeout(5000, () => sock.destroy(new Error('ApiVersions timeout')));
    sock.on('error', reject);
    sock.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      if (buf.length < 4 || buf.length < 4 + buf.readInt32BE(0)) return;
      sock.end();
      let o = 4 + 4; // size, correlation_id
      const errorCode = buf.readInt16BE(o); o += 2;
      if (errorCode !== 0) return reject(new Error(`ApiVersions error ${errorCode}`));
      const n = buf.readInt32BE(o); o += 4;
      const out = {};
      for (let i = 0; i < n; i++, o += 6) {
        out[buf.readInt16BE(o)] = { minVersion: buf.readInt16BE(o + 2), maxVersion: buf.readInt16BE(o + 4) };
      }
      resolve(out);
    });
  });
}

const { requests } = require('kafkajs/src/protocol/requests/index.js');
const apiKeys = require('kafkajs/src/protocol/requests/apiKeys.js');
const broker = await brokerApiVersions(kHost, kPort);
say(`broker ${kHost}:${kPort} advertises ${Object.keys(broker).length} APIs`);
say(['    ', 'api'.padEnd(27), 'kafkajs impl', 'broker min-max', 'kafkajs sends'].join(' '));
for (const [name, def] of Object.entries(requests)) {
  const impl = def.versions.map(Number);
  if (impl.length === 0) continue; // not implemented by kafkajs, never sent
  const key = apiKeys[name];
  const b = broker[key];
  const chosen = b ? Math.min(Math.max(...impl), b.maxVersion) : null;
  const ok = b != null && chosen >= b.minVersion && impl.includes(chosen);
  const range = (lo, hi) => `${lo}-${hi}`;
  say([ok ? 'ok  ' : 'FAIL', name.padEnd(27), range(Math.min(...impl), Math.max(...impl)).padEnd(13),
    (b ? range(b.minVersion, b.maxVersion) : 'absent').padEnd(15), chosen ?? '-'].join(' '));
  if (!ok) failures.push(`kafkajs ${name}: implemented ${impl.join(',')}, broker ${b ? `${b.minVersion}-${b.maxVersion}` : 'absent'}`);
}

// ---- 2. Kafka topic, produce, consume ---------------------------------------------
const kafka = new Kafka({ clientId: 'infra-smoke', brokers: [`${kHost}:${kPort}`], logLevel: logLevel.WARN });
const used = new Map(); // apiName -> set of versions sent
const track = (client) => client.on(client.events.REQUEST, ({ payload }) => {
  if (!used.has(payload.apiName)) used.set(payload.apiName, new Set());
  used.get(payload.apiName).add(payload.apiVersion);
});
const topic = `infra-smoke-${Date.now()}`;
const admin = kafka.admin();
track(admin);
await admin.connect();
const created = await admin.createTopics({ topics: [{ topic, numPartitions: 1, replicationFactor: 1 }], waitForLeaders: true });
check(created === true, `kafka createTopics ${topic}`);
const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
track(producer);
await producer.connect();
const value = `hello ${new Date().toISOString()}`;
const [meta] = await producer.send({ topic, acks: -1, messages: [{ key: 'k', value }] });
check(meta.errorCode === 0, `kafka produce -> partition ${meta.partition} offset ${meta.baseOffset}`);
const consumer = kafka.consumer({ groupId: `${topic}-group` });
track(consumer);
await consumer.connect();
await consumer.subscribe({ topic, fromBeginning: true });
const t0 = Date.now();
const got = await new Promise((resolve, reject) => {
  const timer = setTimeout(() => reject(new Error('no message within 30 s')), 30_000);
  consumer.run({ eachMessage: async ({ message }) => { clearTimeout(timer); resolve(message.value.toString()); } });
});
check(got === value, `kafka consume in group (${Date.now() - t0} ms): "${got}"`);
await consumer.disconnect();
await producer.disconnect();
await admin.deleteTopics({ topics: [topic] }).catch(() => {});
await admin.disconnect();
say('kafkajs sent: ' + [...used].map(([n, v]) => `${n} v${[...v].join('/')}`).join(', '));

// ---- 3. Cassandra LWT -------------------------------------------------------------
const client = new cassandra.Client({ contactPoints: cContact, localDataCenter: cDc });
await client.connect();
const rv = (await client.execute('SELECT release_version FROM system.local')).first().release_version;
say(`cassandra ${rv}, native protocol v${client.controlConnection?.protocolVersion ?? '?'}`);
await client.execute(
  "CREATE KEYSPACE IF NOT EXISTS infra_smoke WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}");
await client.execute('CREATE TABLE IF NOT EXISTS infra_smoke.kv (k text PRIMARY KEY, v text, at timestamp)');
const k = `key-${Date.now()}`;
const insert = 'INSERT INTO infra_smoke.kv (k, v, at) VALUES (?, ?, ?) IF NOT EXISTS';
const lwtOpts = { prepare: true, serialConsistency: cassandra.types.consistencies.localSerial };
const first = await client.execute(insert, [k, 'first', new Date()], lwtOpts);
check(first.wasApplied() === true, `cassandra LWT insert #1 wasApplied()=${first.wasApplied()}`);
const second = await client.execute(insert, [k, 'second', new Date()], lwtOpts);
check(second.wasApplied() === false,
  `cassandra LWT insert #2 wasApplied()=${second.wasApplied()} (existing v=${second.first()?.v})`);
const read = await client.execute('SELECT v FROM infra_smoke.kv WHERE k = ?', [k],
  { prepare: true, consistency: cassandra.types.consistencies.localSerial });
check(read.first()?.v === 'first', `cassandra SERIAL read v=${read.first()?.v}`);
await client.shutdown();

if (failures.length) {
  console.error(`smoke: ${failures.length} failed:\n  ${failures.join('\n  ')}`);
  process.exit(1);
}
console.log('smoke: all checks passed');
