import { loadConfig } from "./config/config.js";
import { startService } from "./runtime/start-service.js";

const config = loadConfig();
const service = await startService(config);

const roles = [...config.roles].join(",");
console.log(`roles ${roles}; ${service.backends ?? `gateway in front of ${config.coreUrl}`}`);
if (service.httpUrl) console.log(`gateway (REST/SSE) listening on ${service.httpUrl}`);
if (service.grpcUrl) console.log(`core (gRPC, gRPC-Web, Connect over h2c) listening on ${service.grpcUrl}`);
console.log("ready");

if (service.httpUrl && service.core && !(await service.core.deps.ledger.hasAnyAccount())) {
  const token = config.adminTokenGenerated ? config.adminToken : "$ADMIN_TOKEN";
  console.log(`
No accounts yet. ${config.adminTokenGenerated ? `ADMIN_TOKEN was not set; this run's admin token is ${config.adminToken}` : ""}
Create an account and a key for every model:

  ACCOUNT=$(curl -s -X POST ${service.httpUrl}/admin/v1/accounts -H "Authorization: Bearer ${token}" \\
    -H "Content-Type: application/json" -d '{"name":"me","balance":"10.00"}' | sed 's/.*"account_id":"\\([^"]*\\)".*/\\1/')
  curl -s -X POST ${service.httpUrl}/admin/v1/accounts/$ACCOUNT/keys -H "Authorization: Bearer ${token}" \\
    -H "Content-Type: application/json" -d '{"models":["*","aimodel-3.1-flash-lite-image"]}'
`);
}

/**
 * SIGTERM/SIGINT: stop taking requests and jobs, let in-flight work finish
 * within SHUTDOWN_GRACE, hand back the rest (their leases lapse at once), exit.
 */
let stopping = false;
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    console.log(`${signal}: stopping`);
    service.close().then(
      () => {
        console.log("stopped");
        process.exit(0);
      },
      (error) => {
        console.error("shutdown failed", error);
        process.exit(1);
      },
    );
  });
}
