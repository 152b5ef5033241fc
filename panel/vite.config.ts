import { readdir, readFile, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { brotliCompressSync, constants, gzipSync } from "node:zlib";
import { defineConfig, type Plugin } from "vite";

/**
 * Brotli and gzip copies of every built text file beside it, made once at
 * build time: the gateway serves the one the browser accepts (@fastify/static
 * preCompressed), so no answer is compressed per request.
 */
function precompress(): Plugin {
  let outDir = "";
  return {
    name: "precompress",
    apply: "build",
    configResolved(config) {
      outDir = resolve(config.root, config.build.outDir);
    },
    async closeBundle() {
      const files = (await readdir(outDir, { recursive: true })).filter((file) => /\.(js|css|html|svg)$/.test(file));
      for (const file of files) {
        const path = join(outDir, file);
        const content = await readFile(path);
        await writeFile(`${path}.br`, brotliCompressSync(content, { params: { [constants.BROTLI_PARAM_QUALITY]: 11 } }));
        await writeFile(`${path}.gz`, gzipSync(content, { level: 9 }));
      }
    },
  };
}

// The panel is served by the gateway under /panel/ (src/transport/http/routes/panel-routes.ts).
export default defineConfig({
  root: import.meta.dirname,
  base: "/panel/",
  build: { outDir: "dist", emptyOutDir: true, target: "es2022", assetsInlineLimit: 0 },
  plugins: [precompress()],
  logLevel: "warn",
});
