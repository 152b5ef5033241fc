// The chaos run's own servers: a 3-node Cassandra ring on 127.0.0.2-4 and a 3-broker KRaft Kafka cluster on 127.0.0.5-7,
// from the jars infra/fetch.sh put in .infra/, with their data under the run's directory. Never the shared 127.0.0.1 ones.
import { spawn } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync, existsSync, openSync } from "node:fs";
import { join } from "node:path";
import { execFileSync } from "node:child_process";
import cassandra from "cassandra-driver";
import { Kafka, logLevel } from "kafkajs";
import { INFRA_DIR, STATE_DIR, registerGroup, forgetGroup, sleep, log } from "./processes.mjs";

export const CASSANDRA_NODES = [
  { name: "cassandra-1", host: "127.0.0.2", token: "-9223372036854775808" },
  { name: "cassandra-2", host: "127.0.0.3", token: "-3074457345618258603" },
  { name: "cassandra-3", host: "127.0.0.4", token: "3074457345618258602" },
];
export const KAFKA_NODES = [
  { name: "kafka-1", id: 1, host: "127.0.0.5" },
  { name: "kafka-2", id: 2, host: "127.0.0.6" },
  { name: "kafka-3", id: 3, host: "127.0.0.7" },
];
export const CASSANDRA_CONTACT_POINTS = CASSANDRA_NODES.map((n) => `${n.host}:9042`).join(",");
export const KAFKA_BROKERS = KAFKA_NODES.map((n) => `${n.host}:9092`).join(",");
const KAFKA_CLUSTER_ID = "Q2hhb3NDbHVzdGVyMDAwMQ";
const CASSANDRA_HEAP = process.env.CHAOS_CASSANDRA_HEAP ?? "768m";
const KAFKA_HEAP = process.env.CHAOS_KAFKA_HEAP ?? "384m";

const JPMS = [
  "-Djdk.attach.allowAttachSelf=true",
  ...["java.base/jdk.internal.misc", "java.base/jdk.internal.ref", "java.base/sun.nio.ch", "java.management.rmi/com.sun.jmx.remote.internal.rmi",
    "java.management/com.sun.jmx.remote.security", "java.rmi/sun.rmi.registry", "java.rmi/sun.rmi.server", "java.sql/java.sql",
    "java.base/java.lang.ref", "jdk.unsupported/sun.misc"].flatMap((p) => ["--add-exports", `${p}=ALL-UNNAMED`]),
  ...["java.base/java.lang.module", "java.base/jdk.internal.loader", "java.base/jdk.internal.ref", "java.base/jdk.internal.reflect",
    "java.base/jdk.internal.math", "java.base/jdk.internal.module", "java.base/jdk.internal.util.jar", "jdk.management/com.sun.management.internal",
    "java.base/sun.nio.ch", "java.base/java.io", "java.base/java.lang.reflect", "java.base/java.lang", "java.base/java.util", "java.base/java.nio"]
    .flatMap((p) => ["--add-opens", `${p}=ALL-UNNAMED`]),
];

/** The group id a node's JVM runs with: iptables' owner match then tells its packets from everyone else's. */
export const gidOf = (node) => String(30_100 + Number(node.host.split(".")[3]));

/** Starts `java args` under `nice -n 10` with the node's group id, in a process group of its own, appending to `logFile`. */
function startJava(node, args, logFile) {
  const { name } = node;
  const out = openSync(logFile, "a");
  const child = spawn("nice", ["-n", "10", "setpriv", "--regid", gidOf(node), "--clear-groups", "java", ...args], {
    detached: true, stdio: ["ignore", out, out],
  });
  registerGroup(name, child.pid);
  child.once("exit", () => forgetGroup(name, child.pid));
  return child;
}

function cassandraYaml(node) {
  const base = readFileSync(join(INFRA_DIR, "cassandra", "cassandra.yaml"), "utf8");
  const seeds = CASSANDRA_NODES.map((n) => `${n.host}:7000`).join(",");
  return base
    .replace(/^cluster_name:.*$/m, "cluster_name: 'chaos'")
    .replace(/^initial_token:.*$/m, `initial_token: ${node.token}`)
    .replace(/^listen_address:.*$/m, `listen_address: ${node.host}`)
    .replace(/^rpc_address:.*$/m, `rpc_address: ${node.host}`)
    .replace(/- seeds: ".*"/, `- seeds: "${seeds}"`);
}

/** Starts one Cassandra node (all three are seeds with fixed tokens, so they start side by side without bootstrapping). */
export function startCassandra(runDir, node) {
  const dir = join(runDir, node.name);
  mkdirSync(join(dir, "tmp"), { recursive: true });
  const yaml = join(dir, "cassandra.yaml");
  if (!existsSync(yaml)) writeFileSync(yaml, cassandraYaml(node));
  const lib = join(STATE_DIR, "cassandra", "lib");
  const jamm = execFileSync("bash", ["-c", `ls ${lib}/jamm-*.jar | head -1`]).toString().trim();
  return startJava(node, [
    `-Xms${CASSANDRA_HEAP}`, `-Xmx${CASSANDRA_HEAP}`, "-Xss256k", "-XX:+UseG1GC", "-XX:+ParallelRefProcEnabled", "-XX:MaxGCPauseMillis=300",
    "-XX:+PerfDisableSharedMem", "-XX:+CrashOnOutOfMemoryError", "-XX:ActiveProcessorCount=1",
    "-Djava.net.preferIPv4Stack=true", "-Djava.awt.headless=true", "-Dchronicle.analytics.disable=true",
    "-Dio.netty.tryReflectionSetAccessible=true", `-Djna.tmpdir=${join(dir, "tmp")}`, ...JPMS, `-javaagent:${jamm}`,
    `-Dcassandra.config=file://${yaml}`, `-Dcassandra.storagedir=${join(dir, "data")}`, `-Dcassandra.logdir=${dir}`,
    `-Dlogback.configurationFile=${join(INFRA_DIR, "cassandra", "logback.xml")}`, "-Dcassandra-foreground=yes",
    "-Dcassandra.skip_wait_for_gossip_to_settle=0", "-Dcassandra.ring_delay_ms=1000",
    // As infra/up.sh: schema changes without fsync of the system tables (throwaway data), so migrations agree in seconds.
    "-Dcassandra.unsafesystem=true",
    "-cp", `${lib}/*`, "org.apache.cassandra.service.CassandraDaemon",
  ], join(dir, "cassandra.log"));
}

function kafkaProperties(node, dir) {
  const voters = KAFKA_NODES.map((n) => `${n.id}@${n.host}:9093`).join(",");
  return [
    "process.roles=broker,controller", `node.id=${node.id}`, `controller.quorum.voters=${voters}`,
    `listeners=PLAINTEXT://${node.host}:9092,CONTROLLER://${node.host}:9093`, `advertised.listeners=PLAINTEXT://${node.host}:9092`,
    "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT", "inter.broker.listener.name=PLAINTEXT",
    "controller.listener.names=CONTROLLER", `log.dirs=${join(dir, "data")}`,
    // What the service's topics get (it creates them without a replication factor): 3 copies, 2 in sync for acks=all.
    "num.partitions=3", "default.replication.factor=3", "min.insync.replicas=2", "unclean.leader.election.enable=false",
    "offsets.topic.replication.factor=3", "offsets.topic.num.partitions=3",
    "transaction.state.log.replication.factor=3", "transaction.state.log.min.isr=2", "transaction.state.log.num.partitions=1",
    "group.initial.rebalance.delay.ms=0", "auto.create.topics.enable=true",
    "num.network.threads=2", "num.io.threads=2", "num.recovery.threads.per.data.dir=1", "background.threads=2",
    "log.segment.bytes=16777216", "",
  ].join("\n");
}

/** Starts one Kafka broker (each also a KRaft controller voter), formatting its storage the first time. */
export function startKafka(runDir, node) {
  const dir = join(runDir, node.name);
  mkdirSync(dir, { recursive: true });
  const props = join(dir, "server.properties");
  if (!existsSync(props)) writeFileSync(props, kafkaProperties(node, dir));
  const cp = `${join(STATE_DIR, "kafka", "lib")}/*`;
  const log4j = `-Dlog4j.configuration=file:${join(INFRA_DIR, "kafka", "log4j.properties")}`;
  if (!existsSync(join(dir, "data", "meta.properties"))) {
    execFileSync("java", ["-Xmx192m", log4j, "-cp", cp, "kafka.tools.StorageTool", "format", "--config", props,
      "--cluster-id", KAFKA_CLUSTER_ID, "--ignore-formatted"], { stdio: ["ignore", openSync(join(dir, "kafka.log"), "a"), "inherit"] });
  }
  return startJava(node, [
    `-Xms${KAFKA_HEAP}`, `-Xmx${KAFKA_HEAP}`, "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:ActiveProcessorCount=1",
    "-Djava.awt.headless=true", log4j, `-Dkafka.logs.dir=${dir}`, "-cp", cp, "kafka.Kafka", props,
  ], join(dir, "kafka.log"));
}

/** Waits until every Cassandra node answers a query at consistency ONE and sees its two peers up. */
export async function waitForCassandra(nodes = CASSANDRA_NODES, timeoutMs = 600_000) {
  const deadline = Date.now() + timeoutMs;
  for (const node of nodes) {
    for (;;) {
      const client = new cassandra.Client({
        contactPoints: [`${node.host}:9042`], localDataCenter: "datacenter1",
        policies: { loadBalancing: new cassandra.policies.loadBalancing.WhiteListPolicy(
          new cassandra.policies.loadBalancing.DCAwareRoundRobinPolicy("datacenter1"), [`${node.host}:9042`]) },
        socketOptions: { connectTimeout: 3000, readTimeout: 5000 },
      });
      try {
        await client.connect();
        const peers = await client.execute("SELECT peer FROM system.peers_v2");
        if (peers.rows.length === nodes.length - 1 || nodes.length !== CASSANDRA_NODES.length) break;
      } catch { /* not up yet */ } finally {
        await client.shutdown().catch(() => {});
      }
      if (Date.now() > deadline) throw new Error(`${node.name} not ready in ${timeoutMs} ms`);
      await sleep(2000);
    }
  }
}

/** Waits until the brokers answer metadata with all three registered. */
export async function waitForKafka(timeoutMs = 300_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const admin = new Kafka({ brokers: KAFKA_BROKERS.split(","), logLevel: logLevel.NOTHING, retry: { retries: 0 } }).admin();
    try {
      await admin.connect();
      const { brokers } = await admin.describeCluster();
      if (brokers.length === KAFKA_NODES.length) return;
    } catch { /* not up yet */ } finally {
      await admin.disconnect().catch(() => {});
    }
    if (Date.now() > deadline) throw new Error(`kafka cluster not ready in ${timeoutMs} ms`);
    await sleep(2000);
  }
}

/** Creates the service's keyspace with 3 replicas before any service process starts (they create it only when missing). */
export async function createKeyspace(keyspace) {
  const client = new cassandra.Client({ contactPoints: CASSANDRA_CONTACT_POINTS.split(","), localDataCenter: "datacenter1",
    socketOptions: { readTimeout: 60_000 } });
  try {
    await client.execute(`CREATE KEYSPACE IF NOT EXISTS ${keyspace} WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}`);
  } finally {
    await client.shutdown();
  }
}

/** The broker leading most partitions of the service's topics (what the "leader" kill targets). */
export async function leadingBroker(prefix) {
  const admin = new Kafka({ brokers: KAFKA_BROKERS.split(","), logLevel: logLevel.NOTHING, retry: { retries: 1 } }).admin();
  try {
    await admin.connect();
    const topics = (await admin.listTopics()).filter((t) => t.startsWith(prefix));
    const { topics: meta } = await admin.fetchTopicMetadata({ topics });
    const count = new Map();
    for (const t of meta) for (const p of t.partitions) count.set(p.leader, (count.get(p.leader) ?? 0) + 1);
    const [id] = [...count.entries()].sort((a, b) => b[1] - a[1])[0] ?? [1];
    return KAFKA_NODES.find((n) => n.id === id) ?? KAFKA_NODES[0];
  } catch {
    return KAFKA_NODES[0];
  } finally {
    await admin.disconnect().catch(() => {});
  }
}

export { log };
