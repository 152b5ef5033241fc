// The nemesis: one fault at a time, each 20-60 s, then its repair and a pause, until the run's time is up. Every fault
// and its recovery (the node restarted and answering again) is a window of the history, for availability per fault.
import { CASSANDRA_NODES, KAFKA_NODES, gidOf, leadingBroker, startCassandra, startKafka, waitForCassandra, waitForKafka } from "./cluster.mjs";
import { healAll, isolate, log, signal, sleep } from "./processes.mjs";
import { SERVICE_PROCESSES, startService } from "./service.mjs";

const between = (min, max) => Math.round(min + Math.random() * (max - min));

/** What a fault needs: the run directory, the service's settings and the Kafka topics' prefix. */
export function faults(ctx) {
  const cass = (i) => CASSANDRA_NODES[i % CASSANDRA_NODES.length];
  const kafkaNode = (i) => KAFKA_NODES[i % KAFKA_NODES.length];
  const restartCassandra = async (node) => {
    startCassandra(ctx.runDir, node);
    await waitForCassandra([node]);
  };
  const restartKafka = async (node) => {
    startKafka(ctx.runDir, node);
    await waitForKafka();
  };
  const restartService = (name) => startService(SERVICE_PROCESSES.find((p) => p.name === name), ctx.env, ctx.runDir);
  const list = [
    (i) => ({ name: `SIGKILL ${cass(i).name}`, inject: () => signal(cass(i).name, "SIGKILL"), heal: () => restartCassandra(cass(i)) }),
    async () => {
      const node = await leadingBroker(ctx.prefix);
      return { name: `SIGKILL ${node.name} (leader)`, inject: () => signal(node.name, "SIGKILL"), heal: () => restartKafka(node) };
    },
    (i) => ({ name: `SIGSTOP ${cass(i + 1).name}`, min: 25, inject: () => signal(cass(i + 1).name, "SIGSTOP"),
      heal: () => signal(cass(i + 1).name, "SIGCONT") }),
    (i) => ({ name: `SIGSTOP ${kafkaNode(i).name}`, min: 25, inject: () => signal(kafkaNode(i).name, "SIGSTOP"),
      heal: () => signal(kafkaNode(i).name, "SIGCONT") }),
    (i) => ({ name: `partition ${cass(i + 2).name}`, partition: true, inject: () => isolate(cass(i + 2).host, gidOf(cass(i + 2))), heal: () => healAll() }),
    (i) => ({ name: `SIGKILL worker-1 + ${cass(i).name}`, inject: () => { signal("worker-1", "SIGKILL"); signal(cass(i).name, "SIGKILL"); },
      heal: async () => { await restartCassandra(cass(i)); await restartService("worker-1"); } }),
    (i) => ({ name: `partition ${kafkaNode(i + 1).name}`, partition: true, inject: () => isolate(kafkaNode(i + 1).host, gidOf(kafkaNode(i + 1))), heal: () => healAll() }),
    async (i) => {
      const node = await leadingBroker(ctx.prefix);
      return { name: `SIGKILL api-1 + ${node.name} (leader)`, inject: () => { signal("api-1", "SIGKILL"); signal(node.name, "SIGKILL"); },
        heal: async () => { await restartKafka(node); await restartService("api-1"); } };
    },
  ];
  return list.map((make, k) => ({ id: FAULT_IDS[k], make }));
}

/** The faults' names for CHAOS_FAULTS (a comma list picks some of them; all by default). */
export const FAULT_IDS = ["kill-cassandra", "kill-kafka-leader", "pause-cassandra", "pause-kafka", "partition-cassandra", "kill-worker-and-cassandra", "partition-kafka", "kill-api-and-kafka-leader"];

/** Runs faults one after another until `endAt`, recording each fault's and each recovery's window in `history.faults`. */
export async function runNemesis(ctx, history, endAt) {
  const list = faults(ctx).filter((f) => !ctx.only || ctx.only.includes(f.id));
  const minGap = 10_000;
  if (list.length === 0) throw new Error("no fault to run");
  for (let round = 0; ; round++) {
    for (let k = 0; k < list.length; k++) {
      const hold = between(20, 60);
      if (Date.now() + hold * 1000 + minGap > endAt) return;
      const fault = await list[k].make(round);
      if (fault.partition && ctx.partitionsUnavailable) {
        log(`skipping ${fault.name}: ${ctx.partitionsUnavailable}`);
        continue;
      }
      const seconds = Math.max(hold, fault.min ?? 20);
      log(`fault: ${fault.name} for ${seconds} s`);
      const start = Date.now();
      await fault.inject();
      await sleep(seconds * 1000);
      const healing = Date.now();
      history.faults.push({ name: fault.name, start, end: healing });
      try {
        await fault.heal();
      } catch (error) {
        log(`heal of ${fault.name} failed: ${error.message}`);
        throw error;
      }
      history.faults.push({ name: `${fault.name} / recovery`, start: healing, end: Date.now() });
      log(`healed: ${fault.name} in ${((Date.now() - healing) / 1000).toFixed(1)} s`);
      await sleep(minGap);
    }
  }
}
