import type { AddressInfo } from "node:net";
import type { FastifyInstance } from "fastify";
import type { Config } from "../config/config.js";
import { buildGateway } from "../transport/http/gateway.js";
import { listenRpc } from "../transport/rpc/rpc-server.js";
import { openBackends, type Backends } from "./backends.js";
import type { CoreClients } from "./core-clients.js";
import { createCore, remoteCoreClients, type Core } from "./core.js";

export interface RunningService {
  /** Gateway origin, e.g. http://127.0.0.1:8080 (when this process serves the API). */
  readonly httpUrl: string;
  /** Core origin (gRPC, gRPC-Web, Connect over h2c), when this process serves the core. */
  readonly grpcUrl?: string;
  readonly core?: Core;
  readonly backends?: string;
  /** Graceful stop: no new requests or jobs, in-flight work finished or handed back. */
  close(): Promise<void>;
}

type Log = (message: string, error: unknown) => void;

/**
 * The composition root. Role `api` serves the gateway on PORT and the core on
 * GRPC_PORT; `worker` and `webhooks` run the consumers. With CORE_URL set the
 * process is only a gateway in front of that core.
 */
export async function startService(config: Config, log: Log = (m, e) => console.error(m, e)): Promise<RunningService> {
  const serveApi = config.roles.has("api");
  let clients: CoreClients | undefined;
  let gateway: FastifyInstance | undefined;
  let httpUrl = "";
  if (serveApi) {
    // The gateway's port decides the default public URL, so it is bound before the core is built.
    const lazy: CoreClients = {
      get generation() { return clients!.generation; },
      get text() { return clients!.text; },
      get admin() { return clients!.admin; },
      get files() { return clients!.files; },
    };
    gateway = await buildGateway(lazy, { logLevel: config.logLevel });
    await gateway.listen({ host: config.host, port: config.port });
    httpUrl = `http://${config.host}:${(gateway.server.address() as AddressInfo).port}`;
  }

  if (config.coreUrl) {
    clients = remoteCoreClients(config.coreUrl);
    return { httpUrl, close: async () => void (await gateway?.close()) };
  }

  let backends: Backends;
  try {
    backends = await openBackends(config, log);
  } catch (error) {
    await gateway?.close();
    throw error;
  }
  const core = createCore(config, backends.ports, config.publicBaseUrl ?? (httpUrl || `http://${config.host}:${config.port}`));
  clients = core.clients;
  await core.startConsumers(config.roles, log);
  const rpc = serveApi ? await listenRpc(core, config.host, config.grpcPort, log) : undefined;

  return {
    httpUrl,
    grpcUrl: rpc && `http://${config.host}:${rpc.port}`,
    core,
    backends: backends.description,
    async close() {
      await gateway?.close();
      await rpc?.close();
      await core.stopConsumers(config.shutdownGraceMs);
      await backends.close();
    },
  };
}
