import type { AddressInfo } from "node:net";
import type { Config } from "../config/config.js";
import { buildGateway } from "../transport/http/gateway.js";
import { listenRpc } from "../transport/rpc/rpc-server.js";
import type { CoreClients } from "./core-clients.js";
import { createCore, embeddedPorts, remoteCoreClients, type Core } from "./embedded-core.js";

export interface RunningService {
  /** Gateway origin, e.g. http://127.0.0.1:8080. */
  readonly httpUrl: string;
  /** Core origin (gRPC, gRPC-Web, Connect over h2c), when this process runs the core. */
  readonly grpcUrl?: string;
  readonly core?: Core;
  close(): Promise<void>;
}

type Log = (message: string, error: unknown) => void;

/**
 * The composition root: builds adapters, the core and its workers, serves the
 * core on GRPC_PORT and the gateway on PORT. With CORE_URL set this process is
 * only a gateway in front of that core.
 */
export async function startService(config: Config, log: Log = (m, e) => console.error(m, e)): Promise<RunningService> {
  let core: Core | undefined;
  let rpc: Awaited<ReturnType<typeof listenRpc>> | undefined;
  let clients: CoreClients;
  // The gateway's port decides the default public URL, so the gateway is bound first.
  const gatewayApp = await buildGateway(
    { get generation() { return clients.generation; }, get text() { return clients.text; }, get admin() { return clients.admin; }, get files() { return clients.files; } },
    { logLevel: config.logLevel },
  );
  await gatewayApp.listen({ host: config.host, port: config.port });
  const httpPort = (gatewayApp.server.address() as AddressInfo).port;
  const httpUrl = `http://${config.host}:${httpPort}`;

  if (config.coreUrl) {
    clients = remoteCoreClients(config.coreUrl);
  } else {
    core = createCore(config, embeddedPorts(config, log), config.publicBaseUrl ?? httpUrl);
    await core.startWorkers();
    rpc = await listenRpc(core, config.host, config.grpcPort, log);
    clients = core.clients;
  }

  return {
    httpUrl,
    grpcUrl: rpc && `http://${config.host}:${rpc.port}`,
    core,
    async close() {
      await gatewayApp.close();
      await rpc?.close();
      await core?.close();
    },
  };
}
