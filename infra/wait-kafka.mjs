// Wait until the Kafka broker answers real client requests (kafkajs admin:
// describeCluster + listTopics + a group coordinator lookup). Exit 0 when ready, 1 on timeout, 2 when the
// watched process died first.
// Usage: node infra/wait-kafka.mjs [--brokers 127.0.0.1:9092] [--timeout 120] [--pid N]
import { parseArgs } from 'node:util';
import kafkajs from 'kafkajs';

const { Kafka, logLevel } = kafkajs;
const { values: opts } = parseArgs({
  options: {
    brokers: { type: 'string', default: process.env.KAFKA_BROKERS ?? '127.0.0.1:9092' },
    timeout: { type: 'string', default: '120' },
    pid: { type: 'string' },
  },
});
const brokers = opts.brokers.split(',');
const deadline = Date.now() + Number(opts.timeout) * 1000;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const alive = (pid) => {
  try { process.kill(Number(pid), 0); return true; } catch { return false; }
};

let lastError = 'no attempt yet';
while (Date.now() < deadline) {
  if (opts.pid && !alive(opts.pid)) {
    console.error(`kafka: process ${opts.pid} exited before it was ready`);
    process.exit(2);
  }
  const kafka = new Kafka({
    clientId: 'infra-wait',
    brokers,
    logLevel: logLevel.NOTHING,
    connectionTimeout: 2000,
    requestTimeout: 5000,
    retry: { retries: 0 },
  });
  const admin = kafka.admin();
  try {
    await admin.connect();
    const cluster = await admin.describeCluster();
    const topics = await admin.listTopics();
    if (cluster.brokers.length === 0) throw new Error('no brokers in metadata');
    // FindCoordinator: on a fresh cluster this creates __consumer_offsets, so the
    // first consumer group of the app does not start with "coordinator not available".
    await admin.describeGroups(['infra-wait']);
    console.log(
      `kafka ready: clusterId=${cluster.clusterId} controller=${cluster.controller} ` +
        `brokers=${cluster.brokers.map((b) => `${b.host}:${b.port}`).join(',')} topics=${topics.length}`,
    );
    await admin.disconnect().catch(() => {});
    process.exit(0);
  } catch (err) {
    lastError = err?.message ?? String(err);
    await admin.disconnect().catch(() => {});
  }
  await sleep(1000);
}
console.error(`kafka: not ready after ${opts.timeout}s (last error: ${lastError})`);
process.exit(1);
