import { loadConfig } from "./config/config.js";
import { launchService } from "./runtime/start-service.js";

const config = loadConfig();
const launched = await launchService(config);
if (launched.httpUrl) console.log(`gateway (REST/SSE) listening on ${launched.httpUrl} (503 until ready)`);

/**
 * SIGTERM: /readyz turns 503 at once and requests are still served for
 * DRAIN_DELAY (a load balancer takes the process out), then no new requests
 * or jobs, in-flight work finishes within SHUTDOWN_GRACE, the rest is handed
 * back (leases lapse at once), exit. SIGINT (Ctrl-C) skips the drain delay.
 */
let stopping = false;
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    console.log(`${signal}: stopping`);
    launched.close({ drain: signal === "SIGTERM" }).then(
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

const service = await launched.ready.catch((error) => {
  if (stopping) return new Promise<never>(() => {}); // a signal is shutting us down: let it finish
  console.error("start-up failed", error);
  process.exit(1);
});

const roles = [...config.roles].join(",");
console.log(`roles ${roles}; ${service.backends ?? `gateway in front of ${config.coreUrl}`}`);
if (service.grpcUrl) console.log(`core (gRPC, gRPC-Web, Connect over h2c) listening on ${service.grpcUrl}`);
if (service.httpUrl) console.log(`web panel on ${service.httpUrl}/panel/`);
console.log("ready");

if (service.httpUrl && service.core && !(await service.core.deps.ledger.hasAnyAccount())) {
  const token = config.adminTokenGenerated ? config.adminToken : "$ADMIN_TOKEN";
  console.log(`
No accounts yet. ${config.adminTokenGenerated ? `ADMIN_TOKEN was not set; this run's admin token is ${config.adminToken}` : ""}
In a browser: open ${service.httpUrl}/panel/, sign in with the admin token, open an account, issue its owner
token, sign in as its owner and create a key. Or from a shell, an account and a key for every model:

  ACCOUNT=$(curl -s -X POST ${service.httpUrl}/admin/v1/accounts -H "Authorization: Bearer ${token}" \\
    -H "Content-Type: application/json" -d '{"name":"me","balance":"10.00"}' | sed 's/.*"account_id":"\\([^"]*\\)".*/\\1/')
  curl -s -X POST ${service.httpUrl}/admin/v1/accounts/$ACCOUNT/keys -H "Authorization: Bearer ${token}" \\
    -H "Content-Type: application/json" -d '{"models":["*","aimodel-3.1-flash-lite-image"]}'
`);
}
