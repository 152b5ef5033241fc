// backends: embedded, real
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import cassandra from "cassandra-driver";
import kafkajs from "kafkajs";
import { configFrom, type Config } from "../../src/config/config.js";
import { CassandraClient, clientOptions, keyspaceStatement, openSession } from "../../src/adapters/cassandra/cassandra-session.js";
import { busTopics, createKafkaEventBus } from "../../src/adapters/kafka/kafka-event-bus.js";
import { createKafkaJobFeed, JOB_LIFECYCLE_TOPIC } from "../../src/adapters/kafka/kafka-job-feed.js";
import { withReplication } from "../../src/adapters/kafka/kafka-topics.js";
import { SINGLE_NODE_REPLICATION } from "../support/harness.js";
import { lineLogger } from "../support/capture-log.js";

/**
 * Consistency as configuration (issue 40): the consistency levels, the keyspace's replication, the topics' replication
 * factor and min.insync.replicas and the producer's acks are settings with defaults for 3 replicas, and they reach the
 * statements and topic configurations the adapters make. Against infra/'s one node and one broker (TEST_BACKEND=real),
 * a keyspace and topics are created with the single-node values, and a factor of 3 is refused saying which setting to change.
 */

const { consistencies } = cassandra.types;
const CONTACT_POINTS = process.env.CASSANDRA_CONTACT_POINTS?.split(",").filter(Boolean) ?? [];
const BROKERS = process.env.KAFKA_BROKERS?.split(",").filter(Boolean) ?? [];
const realSkip = process.env.TEST_BACKEND !== "real" || CONTACT_POINTS.length === 0 || BROKERS.length === 0
  ? "needs TEST_BACKEND=real with CASSANDRA_CONTACT_POINTS and KAFKA_BROKERS (bash infra/with-servers.sh)" : false;

/** A configuration on Cassandra and Kafka with `env` on top. */
function scaledOut(env: Record<string, string> = {}): Config {
  return configFrom({ CASSANDRA_CONTACT_POINTS: "c1:9042,c2:9042,c3:9042", KAFKA_BROKERS: "k1:9092,k2:9092,k3:9092", ...env });
}

const entry = (topic: kafkajs.ITopicConfig, name: string) => topic.configEntries?.find((e) => e.name === name)?.value;

describe("replication settings: what the configuration makes of them", () => {
  it("when nothing is set, then the keyspace is NetworkTopologyStrategy with 3 copies in the local data center, statements LOCAL_QUORUM, Paxos LOCAL_SERIAL", () => {
    const settings = scaledOut().cassandra!;
    assert.deepEqual(
      [settings.replication, settings.consistency, settings.serialConsistency],
      [{ strategy: "NetworkTopologyStrategy", factor: 3 }, "LOCAL_QUORUM", "LOCAL_SERIAL"],
    );
    assert.equal(keyspaceStatement(settings),
      "CREATE KEYSPACE IF NOT EXISTS generation WITH replication = {'class': 'NetworkTopologyStrategy', 'datacenter1': 3}");
    const options = clientOptions(settings, settings.keyspace);
    assert.deepEqual([options.queryOptions?.consistency, options.queryOptions?.serialConsistency], [consistencies.localQuorum, consistencies.localSerial]);
  });

  it("when the strategy, factor, data center and levels are set, then the statement and the driver's options say them (names in any case)", () => {
    const simple = scaledOut({ CASSANDRA_REPLICATION_STRATEGY: "simplestrategy", CASSANDRA_REPLICATION_FACTOR: "5", CASSANDRA_KEYSPACE: "gen" }).cassandra!;
    assert.equal(keyspaceStatement(simple), "CREATE KEYSPACE IF NOT EXISTS gen WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 5}");
    const quoted = scaledOut({ CASSANDRA_LOCAL_DC: "dc'1" }).cassandra!;
    assert.match(keyspaceStatement(quoted), /\{'class': 'NetworkTopologyStrategy', 'dc''1': 3\}$/, "a quote in the data center's name stays inside its literal");
    const strict = scaledOut({ CASSANDRA_CONSISTENCY: "quorum", CASSANDRA_SERIAL_CONSISTENCY: "Serial" }).cassandra!;
    assert.deepEqual([strict.consistency, strict.serialConsistency], ["QUORUM", "SERIAL"]);
    const options = clientOptions(strict);
    assert.deepEqual([options.queryOptions?.consistency, options.queryOptions?.serialConsistency], [consistencies.quorum, consistencies.serial]);
    assert.equal(clientOptions(scaledOut({ CASSANDRA_CONSISTENCY: "ALL" }).cassandra!).queryOptions?.consistency, consistencies.all);
  });

  it("when nothing is set, then every topic the event bus and the job feed create has 3 copies and min.insync.replicas 2, and publishes wait for all in-sync copies", () => {
    const kafka = scaledOut().kafka!;
    assert.deepEqual([kafka.replication, kafka.acks], [{ factor: 3, minInsyncReplicas: 2 }, -1]);
    const topics = withReplication(busTopics({}, 6, new Map([[1000, "delay.1000ms"]])), kafka.replication);
    assert.ok(topics.length >= 5, `the bus's topics (${topics.length})`);
    for (const topic of topics) {
      assert.equal(topic.replicationFactor, 3, topic.topic);
      assert.equal(entry(topic, "min.insync.replicas"), "2", topic.topic);
    }
    const delay = topics.find((topic) => topic.topic === "delay.1000ms")!;
    assert.equal(entry(delay, "retention.ms"), String(7 * 86_400_000), "the topic's own settings are kept beside them");
    assert.deepEqual(withReplication([{ topic: JOB_LIFECYCLE_TOPIC }], undefined), [{ topic: JOB_LIFECYCLE_TOPIC }], "left out: the broker's defaults");
  });

  it("when the single-node development values are set, then one copy everywhere; KAFKA_ACKS=1 waits for the leader alone", () => {
    const single = scaledOut(SINGLE_NODE_REPLICATION);
    assert.deepEqual([single.cassandra!.replication.factor, single.kafka!.replication], [1, { factor: 1, minInsyncReplicas: 1 }]);
    assert.equal(scaledOut({ KAFKA_ACKS: "1" }).kafka!.acks, 1);
  });

  it("when nothing is set, then a read not answered in 500 ms goes to one more node, and a connection is closed after 3 timeouts; CASSANDRA_SPECULATIVE_READ_DELAY changes the delay", () => {
    const options = clientOptions(scaledOut().cassandra!);
    const policy = options.policies?.speculativeExecution;
    assert.ok(policy instanceof cassandra.policies.speculativeExecution.ConstantSpeculativeExecutionPolicy, "a constant speculative execution policy");
    assert.deepEqual(policy.getOptions(), new Map<string, unknown>([["delay", 500], ["maxSpeculativeExecutions", 1]]));
    assert.equal(options.socketOptions?.defunctReadTimeoutThreshold, 3);
    assert.equal(options.socketOptions?.readTimeout, 15_000, "writes and lightweight transactions still wait out the server's own timeouts");
    const quick = clientOptions(scaledOut({ CASSANDRA_SPECULATIVE_READ_DELAY: "120ms" }).cassandra!).policies?.speculativeExecution;
    assert.equal(quick?.getOptions().get("delay"), 120);
    assert.throws(() => scaledOut({ CASSANDRA_SPECULATIVE_READ_DELAY: "soon" }), /CASSANDRA_SPECULATIVE_READ_DELAY/);
  });

  it("when a value is refused, then the start stops naming the variable: a level below a quorum, an unknown strategy, min.insync.replicas above the factor", () => {
    assert.throws(() => scaledOut({ CASSANDRA_CONSISTENCY: "ONE" }), { message: 'CASSANDRA_CONSISTENCY must be one of LOCAL_QUORUM, QUORUM, ALL (got "ONE")' });
    assert.throws(() => scaledOut({ CASSANDRA_SERIAL_CONSISTENCY: "LOCAL_QUORUM" }), /CASSANDRA_SERIAL_CONSISTENCY must be one of LOCAL_SERIAL, SERIAL/);
    assert.throws(() => scaledOut({ CASSANDRA_REPLICATION_STRATEGY: "EverywhereStrategy" }), /CASSANDRA_REPLICATION_STRATEGY must be one of/);
    assert.throws(() => scaledOut({ CASSANDRA_REPLICATION_FACTOR: "0" }), { message: 'CASSANDRA_REPLICATION_FACTOR must be an integer ≥ 1 (got "0")' });
    assert.throws(() => scaledOut({ KAFKA_ACKS: "0" }), { message: 'KAFKA_ACKS must be one of all, 1 (got "0")' });
    assert.throws(() => scaledOut({ KAFKA_REPLICATION_FACTOR: "2", KAFKA_MIN_INSYNC_REPLICAS: "3" }),
      { message: "KAFKA_MIN_INSYNC_REPLICAS (3) must be at most KAFKA_REPLICATION_FACTOR (2): no publish could be acknowledged" });
  });
});

describe("replication settings against one Cassandra node and one Kafka broker", { skip: realSkip }, () => {
  it("when the service's session creates its keyspace with the single-node values, then Cassandra holds it with that replication", async () => {
    const keyspace = `repl_${randomBytes(4).toString("hex")}`;
    const settings = configFrom({ ...SINGLE_NODE_REPLICATION, CASSANDRA_CONTACT_POINTS: CONTACT_POINTS.join(","), CASSANDRA_KEYSPACE: keyspace }).cassandra!;
    const session = await openSession(settings);
    try {
      const row = (await session.execute("SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = ?", [keyspace])).first();
      assert.deepEqual(row?.replication, { class: "org.apache.cassandra.locator.NetworkTopologyStrategy", datacenter1: "1" });
    } finally {
      await session.execute(`DROP KEYSPACE IF EXISTS ${keyspace}`, [], { prepare: false }).catch(() => undefined);
      await session.shutdown();
    }
  });

  it("when the service reads, then the driver may send the read to another node (idempotent); a write or a lightweight transaction never", async () => {
    const keyspace = `repl_${randomBytes(4).toString("hex")}`;
    const settings = configFrom({ ...SINGLE_NODE_REPLICATION, CASSANDRA_CONTACT_POINTS: CONTACT_POINTS.join(","), CASSANDRA_KEYSPACE: keyspace }).cassandra!;
    const sent: { query: string; idempotent: boolean }[] = [];
    // A class of the driver's own (it accepts no other tracker): what each request was sent as.
    const tracker = new (class extends cassandra.tracker.RequestLogger {
      override onSuccess(_host: unknown, query: unknown, _params: unknown, options: cassandra.ExecutionOptions) {
        sent.push({ query: String(query), idempotent: options.isIdempotent() === true }); // unset is not idempotent
      }
      override onError(_host: unknown, query: unknown, _params: unknown, options: cassandra.ExecutionOptions) {
        sent.push({ query: String(query), idempotent: options.isIdempotent() === true }); // unset is not idempotent
      }
    })({});
    const admin = await openSession(settings);
    const client = new CassandraClient(new cassandra.Client({ ...clientOptions(settings), requestTracker: tracker }));
    try {
      await client.execute(`CREATE TABLE ${keyspace}.t (k text PRIMARY KEY, v int)`, [], { prepare: false });
      await client.execute(`INSERT INTO ${keyspace}.t (k, v) VALUES (?, ?)`, ["a", 1]);
      await client.execute(`UPDATE ${keyspace}.t SET v = ? WHERE k = ? IF v = ?`, [2, "a", 1]);
      const row = (await client.execute(`  select v FROM ${keyspace}.t WHERE k = ?`, ["a"])).first();
      assert.equal(row?.get("v"), 2, "the conditional update applied once");
      const idempotent = (start: string) => sent.find((entry) => entry.query.trimStart().toUpperCase().startsWith(start))?.idempotent;
      assert.deepEqual(
        [idempotent("CREATE"), idempotent("INSERT"), idempotent("UPDATE"), idempotent("SELECT")],
        [false, false, false, true],
        JSON.stringify(sent),
      );
    } finally {
      await client.shutdown();
      await admin.execute(`DROP KEYSPACE IF EXISTS ${keyspace}`, [], { prepare: false }).catch(() => undefined);
      await admin.shutdown();
    }
  });

  it("when the job feed creates its topic with the single-node values, then the broker holds it with one copy and min.insync.replicas 1", async () => {
    const prefix = `repl-${randomBytes(4).toString("hex")}.`;
    const kafka = configFrom({ ...SINGLE_NODE_REPLICATION, KAFKA_BROKERS: BROKERS.join(",") }).kafka!;
    const feed = await createKafkaJobFeed({
      brokers: BROKERS, clientId: "replication-test", topicPrefix: prefix, partitions: 1, replication: kafka.replication, logger: lineLogger(() => undefined),
    });
    const admin = new kafkajs.Kafka({ brokers: BROKERS, logLevel: kafkajs.logLevel.NOTHING }).admin();
    await admin.connect();
    const topic = `${prefix}${JOB_LIFECYCLE_TOPIC}`;
    try {
      const [metadata] = (await admin.fetchTopicMetadata({ topics: [topic] })).topics;
      assert.deepEqual(metadata?.partitions.map((p) => p.replicas.length), [1]);
      const described = await admin.describeConfigs({ resources: [{ type: kafkajs.ConfigResourceTypes.TOPIC, name: topic }], includeSynonyms: false });
      const minInsync = described.resources[0]?.configEntries.find((e) => e.configName === "min.insync.replicas");
      assert.equal(minInsync?.configValue, "1");
    } finally {
      await feed.close();
      await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
      await admin.disconnect();
    }
  });

  it("when the event bus is asked for 3 copies on one broker, then its start fails naming KAFKA_REPLICATION_FACTOR and the development values", async () => {
    const kafka = configFrom({ KAFKA_BROKERS: BROKERS.join(",") }).kafka!;
    await assert.rejects(
      createKafkaEventBus({
        brokers: BROKERS, clientId: "replication-test", topicPrefix: `repl-${randomBytes(4).toString("hex")}.`, partitions: 1,
        delayTiersMs: [1000], replication: kafka.replication, acks: kafka.acks, logger: lineLogger(() => undefined), timing: { retries: 1 },
      }),
      /replication factor 3 \(KAFKA_REPLICATION_FACTOR\).*KAFKA_REPLICATION_FACTOR=1 and KAFKA_MIN_INSYNC_REPLICAS=1/,
    );
  });
});
