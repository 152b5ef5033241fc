// Wait until Cassandra answers a real CQL query (cassandra-driver:
// SELECT release_version FROM system.local). Exit 0 when ready, 1 on timeout,
// 2 when the watched process died first.
// Usage: node infra/wait-cassandra.mjs [--contact 127.0.0.1:9042] [--dc datacenter1] [--timeout 180] [--pid N]
import { parseArgs } from 'node:util';
import cassandra from 'cassandra-driver';

const { values: opts } = parseArgs({
  options: {
    contact: { type: 'string', default: process.env.CASSANDRA_CONTACT_POINTS ?? '127.0.0.1:9042' },
    dc: { type: 'string', default: process.env.CASSANDRA_LOCAL_DC ?? 'datacenter1' },
    timeout: { type: 'string', default: '180' },
    pid: { type: 'string' },
  },
});
const deadline = Date.now() + Number(opts.timeout) * 1000;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const alive = (pid) => {
  try { process.kill(Number(pid), 0); return true; } catch { return false; }
};

let lastError = 'no attempt yet';
while (Date.now() < deadline) {
  if (opts.pid && !alive(opts.pid)) {
    console.error(`cassandra: process ${opts.pid} exited before it was ready`);
    process.exit(2);
  }
  const client = new cassandra.Client({
    contactPoints: opts.contact.split(','),
    localDataCenter: opts.dc,
    socketOptions: { connectTimeout: 2000, readTimeout: 5000 },
    pooling: { warmup: false },
  });
  try {
    await client.connect();
    const rs = await client.execute('SELECT release_version FROM system.local');
    const version = rs.first()?.release_version;
    if (!version) throw new Error('system.local returned no release_version');
    console.log(`cassandra ready: release_version=${version} dc=${opts.dc} contact=${opts.contact}`);
    await client.shutdown().catch(() => {});
    process.exit(0);
  } catch (err) {
    lastError = err?.message ?? String(err);
    await client.shutdown().catch(() => {});
  }
  await sleep(1000);
}
console.error(`cassandra: not ready after ${opts.timeout}s (last error: ${lastError})`);
process.exit(1);
