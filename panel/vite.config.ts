import { defineConfig } from "vite";

// The panel is served by the gateway under /panel/ (src/transport/http/routes/panel-routes.ts).
export default defineConfig({
  root: import.meta.dirname,
  base: "/panel/",
  build: { outDir: "dist", emptyOutDir: true, target: "es2022", assetsInlineLimit: 0 },
  logLevel: "warn",
});
