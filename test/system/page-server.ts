import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { build } from "esbuild";
import { REPO_ROOT } from "../support/repo.js";

const CLIENT_ENTRY = join(REPO_ROOT, "test", "system", "browser-client", "gateway-client.ts");

/** test/system/browser-client/gateway-client.ts and everything it imports (connect-web, the generated code) as one browser module. */
export async function bundleClient(): Promise<string> {
  const result = await build({
    entryPoints: [CLIENT_ENTRY],
    bundle: true,
    format: "esm",
    platform: "browser",
    target: "es2022",
    write: false,
    logLevel: "silent",
  });
  return result.outputFiles[0]!.text;
}

export interface PageServer {
  /** The page's origin, e.g. http://127.0.0.1:41234. */
  readonly origin: string;
  close(): Promise<void>;
}

const PAGE = `<!doctype html>
<html><head><meta charset="utf-8"><title>gateway client</title></head>
<body><script type="module" src="/client.js"></script></body></html>`;

/** A web app's origin: a loopback HTTP server with one page that loads the bundled client. */
export async function servePage(bundle: string): Promise<PageServer> {
  const server: Server = createServer((request, response) => {
    const path = (request.url ?? "/").split("?")[0];
    if (path === "/") {
      response.writeHead(200, { "content-type": "text/html; charset=utf-8" }).end(PAGE);
    } else if (path === "/client.js") {
      response.writeHead(200, { "content-type": "text/javascript; charset=utf-8" }).end(bundle);
    } else {
      response.writeHead(404).end();
    }
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
