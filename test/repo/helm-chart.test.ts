// backends: embedded
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import { goTool, runTool } from "../support/go-tools.js";
import { repoPath } from "../support/repo.js";

/**
 * The Helm chart (deploy/helm/generation-service, issue 40), linted and rendered by helm itself (pinned in
 * infra/tools.sh): with its default values and with values for an external Cassandra and Kafka, each rendered
 * object is checked: one Deployment per role, their probes, the non-root security context, the Secret they read,
 * the API's Services, disruption budget and autoscaler, and the settings in the ConfigMap.
 */

const CHART = repoPath("deploy", "helm", "generation-service");

interface K8sObject {
  kind: string;
  metadata: { name: string; labels?: Record<string, string> };
  // Kubernetes's shapes, checked field by field below.
  spec?: any;
  data?: Record<string, string>;
  stringData?: Record<string, string>;
}

const EXTERNAL_VALUES = `
cassandra:
  contactPoints: ["cass-0.db.example:9042", "cass-1.db.example:9042", "cass-2.db.example:9042"]
  localDataCenter: eu-west
  keyspace: generation_prod
  consistency: QUORUM
  serialConsistency: SERIAL
kafka:
  brokers: ["kafka-0.example:9092", "kafka-1.example:9092", "kafka-2.example:9092"]
  topicPrefix: prod.
  minInsyncReplicas: 2
secrets:
  existingSecret: generation-secrets
config:
  PUBLIC_BASE_URL: https://generation.example
api:
  autoscaling: { minReplicas: 3, maxReplicas: 12, targetCPUUtilizationPercentage: 60 }
`;

async function helm(args: readonly string[]): Promise<string> {
  const run = await runTool(goTool("helm"), args, { timeoutMs: 120_000 });
  assert.equal(run.code, 0, `helm ${args.join(" ")}:\n${run.stdout}\n${run.stderr}`);
  return run.stdout;
}

/** The chart rendered with the values files given, as objects. */
async function render(valuesFiles: readonly string[] = []): Promise<K8sObject[]> {
  const text = await helm(["template", "gen", CHART, "--namespace", "prod", ...valuesFiles.flatMap((file) => ["-f", file])]);
  return parseAllDocuments(text).map((doc) => doc.toJSON() as K8sObject | null).filter((o): o is K8sObject => o !== null);
}

function withExternalValues<T>(use: (file: string) => Promise<T>): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), "helm-values-"));
  const file = join(dir, "external.yaml");
  writeFileSync(file, EXTERNAL_VALUES);
  return use(file).finally(() => rmSync(dir, { recursive: true, force: true }));
}

const named = (objects: K8sObject[], kind: string, name: string) =>
  objects.find((o) => o.kind === kind && o.metadata.name === name) ?? assert.fail(`no ${kind} ${name} among ${objects.map((o) => `${o.kind}/${o.metadata.name}`).join(", ")}`);

describe("the Helm chart", () => {
  it("when helm lints it, with its defaults and with external Cassandra and Kafka values, then it finds no error", async () => {
    assert.match(await helm(["lint", CHART, "--strict"]), /1 chart\(s\) linted, 0 chart\(s\) failed/);
    await withExternalValues(async (file) => assert.match(await helm(["lint", CHART, "--strict", "-f", file]), /0 chart\(s\) failed/));
  });

  it("when rendered with its defaults, then one Deployment per role, Services, the API's PDB and HPA, a ConfigMap and a Secret", async () => {
    const objects = await render();
    const kinds = objects.map((o) => `${o.kind}/${o.metadata.name}`).sort();
    assert.deepEqual(kinds, [
      "ConfigMap/gen-generation-service-config",
      "Deployment/gen-generation-service-api",
      "Deployment/gen-generation-service-webhooks",
      "Deployment/gen-generation-service-worker",
      "HorizontalPodAutoscaler/gen-generation-service-api",
      "PodDisruptionBudget/gen-generation-service-api",
      "Secret/gen-generation-service-secrets",
      "Service/gen-generation-service-api",
      "Service/gen-generation-service-webhooks-metrics",
      "Service/gen-generation-service-worker-metrics",
    ]);
    const config = named(objects, "ConfigMap", "gen-generation-service-config").data!;
    assert.deepEqual(
      [config.CASSANDRA_REPLICATION_FACTOR, config.CASSANDRA_CONSISTENCY, config.CASSANDRA_SERIAL_CONSISTENCY, config.KAFKA_REPLICATION_FACTOR, config.KAFKA_MIN_INSYNC_REPLICAS, config.KAFKA_ACKS],
      ["3", "LOCAL_QUORUM", "LOCAL_SERIAL", "3", "2", "all"],
      "the defaults for 3 replicas",
    );
    const secret = named(objects, "Secret", "gen-generation-service-secrets").stringData!;
    assert.ok(secret.ADMIN_TOKEN!.length >= 32 && secret.URL_SIGNING_SECRET!.length >= 32, "generated secrets long enough for the service");
    assert.ok(!Object.keys(config).some((name) => /TOKEN|SECRET|API_KEY|HEADERS/.test(name)), "no secret in the ConfigMap");
  });

  it("when each role's Deployment is read, then ROLE is its name, probes ask /livez and /readyz on its port, it runs as non-root, and it reads the ConfigMap and the Secret", async () => {
    const objects = await render();
    const ports = { api: ["http", 8080], worker: ["metrics", 9464], webhooks: ["metrics", 9464] } as const;
    for (const [role, [portName, portNumber]] of Object.entries(ports)) {
      const deployment = named(objects, "Deployment", `gen-generation-service-${role}`);
      const pod = deployment.spec.template.spec;
      const [container] = pod.containers;
      assert.deepEqual(container.env, [{ name: "ROLE", value: role }]);
      assert.deepEqual(container.livenessProbe.httpGet, { path: "/livez", port: portName }, role);
      assert.deepEqual(container.readinessProbe.httpGet, { path: "/readyz", port: portName }, role);
      assert.ok(container.ports.some((p: { name: string; containerPort: number }) => p.name === portName && p.containerPort === portNumber), role);
      assert.equal(pod.securityContext.runAsNonRoot, true);
      assert.equal(pod.securityContext.runAsUser, 1000);
      assert.deepEqual([container.securityContext.allowPrivilegeEscalation, container.securityContext.readOnlyRootFilesystem], [false, true]);
      assert.deepEqual(container.securityContext.capabilities.drop, ["ALL"]);
      assert.deepEqual(container.envFrom, [
        { configMapRef: { name: "gen-generation-service-config" } },
        { secretRef: { name: "gen-generation-service-secrets" } },
      ]);
      assert.deepEqual(deployment.spec.selector.matchLabels, {
        "app.kubernetes.io/name": "generation-service", "app.kubernetes.io/instance": "gen", "app.kubernetes.io/component": role,
      });
    }
    assert.equal(named(objects, "Deployment", "gen-generation-service-api").spec.replicas, undefined, "the HPA owns the API's replicas");
    assert.equal(named(objects, "Deployment", "gen-generation-service-worker").spec.replicas, 2);
  });

  it("when the API's Service, PDB and HPA are read, then they select the API's pods and the HPA scales its Deployment on CPU", async () => {
    const objects = await render();
    const service = named(objects, "Service", "gen-generation-service-api").spec;
    assert.equal(service.selector["app.kubernetes.io/component"], "api");
    assert.deepEqual(service.ports.map((p: { name: string; port: number; targetPort: string }) => [p.name, p.port, p.targetPort]), [["http", 8080, "http"], ["grpc", 8081, "grpc"]]);
    assert.deepEqual(named(objects, "PodDisruptionBudget", "gen-generation-service-api").spec, {
      minAvailable: 1,
      selector: { matchLabels: { "app.kubernetes.io/name": "generation-service", "app.kubernetes.io/instance": "gen", "app.kubernetes.io/component": "api" } },
    });
    const hpa = named(objects, "HorizontalPodAutoscaler", "gen-generation-service-api").spec;
    assert.deepEqual(hpa.scaleTargetRef, { apiVersion: "apps/v1", kind: "Deployment", name: "gen-generation-service-api" });
    assert.deepEqual([hpa.minReplicas, hpa.maxReplicas, hpa.metrics[0].resource], [2, 10, { name: "cpu", target: { type: "Utilization", averageUtilization: 70 } }]);
  });

  it("when rendered with external Cassandra and Kafka values and an existing Secret, then the ConfigMap carries them and no Secret is made", async () => {
    const objects = await withExternalValues((file) => render([file]));
    const config = named(objects, "ConfigMap", "gen-generation-service-config").data!;
    assert.deepEqual(
      [config.CASSANDRA_CONTACT_POINTS, config.CASSANDRA_LOCAL_DC, config.CASSANDRA_KEYSPACE, config.CASSANDRA_CONSISTENCY, config.CASSANDRA_SERIAL_CONSISTENCY],
      ["cass-0.db.example:9042,cass-1.db.example:9042,cass-2.db.example:9042", "eu-west", "generation_prod", "QUORUM", "SERIAL"],
    );
    assert.deepEqual([config.KAFKA_BROKERS, config.KAFKA_TOPIC_PREFIX], ["kafka-0.example:9092,kafka-1.example:9092,kafka-2.example:9092", "prod."]);
    assert.equal(config.PUBLIC_BASE_URL, "https://generation.example");
    assert.ok(!objects.some((o) => o.kind === "Secret"), "the existing Secret is used, none made");
    for (const role of ["api", "worker", "webhooks"]) {
      const [container] = named(objects, "Deployment", `gen-generation-service-${role}`).spec.template.spec.containers;
      assert.deepEqual(container.envFrom[1], { secretRef: { name: "generation-secrets" } }, role);
    }
    const hpa = named(objects, "HorizontalPodAutoscaler", "gen-generation-service-api").spec;
    assert.deepEqual([hpa.minReplicas, hpa.maxReplicas, hpa.metrics[0].resource.target.averageUtilization], [3, 12, 60]);
  });
});
