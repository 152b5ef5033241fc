// The layer rules of src/ (issue 36), checked by dependency-cruiser: `npm run lint:deps`, the first step of
// `npm test`, and test/shared/layer-rules.test.ts in the embedded suite. Each rule names the layer it protects
// and why; a violation names the importing module and the module it may not import.
//
// The layers: domain (pure rules) ← ports (interfaces) ← core (services, workers) ← transport (the REST gateway
// and the gRPC/Connect port), with adapters (technology behind the ports) beside the core, config (the env
// schema) and shared (tiny helpers of no layer) at the bottom, and runtime (the composition root, main.ts with
// it) on top: the only place that knows every layer, so it has no rule. gen/ (generated protobuf code, outside
// src/) is a vocabulary every layer but the domain speaks.
//
// Type-only imports count (tsPreCompilationDeps): a layer that names another's type depends on it as much as
// one that calls it.

/** Our own code: what the rules are about. npm packages and node built-ins are never "ours". */
const OURS = "^(src|gen)/";

/** A rule that `from` may import none of our modules but those matching `allowed`. */
function onlyImports(name, from, allowed, comment) {
  return { name, severity: "error", comment, from: { path: from }, to: { path: OURS, pathNot: allowed } };
}

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    onlyImports(
      "domain-imports-only-domain",
      "^src/domain/",
      ["^src/domain/"],
      "The domain is the rules themselves (money, pricing, validation, job states): pure, testable alone and the same " +
        "whatever stores or protocols surround it. It imports nothing of ours outside itself, not even gen/ (the wire " +
        "format is the edges' business); node built-ins are fine.",
    ),
    onlyImports(
      "ports-import-only-domain-and-shared",
      "^src/ports/",
      ["^src/(ports|domain|shared)/", "^gen/"],
      "Ports are the interfaces the core needs from the world, stated in the domain's words (and gen's messages). A " +
        "port that imported the core, an adapter or the runtime would tie every implementation of it to them.",
    ),
    onlyImports(
      "core-imports-only-domain-and-ports",
      "^src/core/",
      ["^src/(core|domain|ports|shared)/", "^gen/"],
      "The core orchestrates over ports: never an adapter (a technology: SQLite, Cassandra, Kafka, prom-client), the " +
        "transport (a protocol), the runtime (the wiring) or config (the environment). What it needs of them arrives " +
        "through its ports and settings, so every backend and every edge can be swapped without touching it.",
    ),
    onlyImports(
      "adapters-import-only-domain-and-ports",
      "^src/adapters/",
      ["^src/(adapters|domain|ports|shared)/", "^gen/"],
      "An adapter implements a port with one technology. It never reaches into the core (a type an adapter needs " +
        "from the core belongs in ports/), the transport, the runtime or config: the runtime hands it its settings, " +
        "so adapters stay interchangeable and usable in tests alone.",
    ),
    onlyImports(
      "transport-imports-only-the-core-entry-point",
      "^src/transport/",
      ["^src/(transport|config|shared)/", "^src/core/index\\.ts$", "^gen/"],
      "The edges translate (JSON and headers to messages, errors back) and call the core through its public entry " +
        "point, src/core/index.ts: never the core's internals (they can then move freely), never the domain directly " +
        "(what the edges need of it is re-exported by the core), never an adapter (metrics and tracing reach the " +
        "edges as interfaces declared in transport, filled by the runtime) and never the runtime (which imports them).",
    ),
    onlyImports(
      "config-imports-only-config",
      "^src/config/",
      ["^src/config/"],
      "Config reads and checks the environment into plain settings. Importing a layer would let a module's load " +
        "order or a domain change alter what the environment means; each layer declares the settings it takes instead.",
    ),
    onlyImports(
      "shared-imports-only-shared",
      "^src/shared/",
      ["^src/shared/"],
      "shared/ holds tiny helpers of no layer that any layer may import; one that imported a layer would make every " +
        "importer depend on that layer behind its back.",
    ),
    {
      name: "no-circular",
      severity: "error",
      comment:
        "Modules that import each other cannot be understood, tested or moved alone, and ESM hands one of them the " +
        "other half-initialised at load time. Move what both need into a third module (or down a layer).",
      from: { path: "^src/" },
      to: { circular: true },
    },
    {
      name: "no-unresolvable",
      severity: "error",
      comment: "An import dependency-cruiser cannot resolve would escape every rule above.",
      from: { path: "^src/" },
      to: { couldNotResolve: true },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    // import type counts: the rules are about what a layer knows, not only what it loads.
    tsPreCompilationDeps: true,
    // NodeNext resolution: "./x.js" in a .ts file is ./x.ts.
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: {
      exportsFields: ["exports"],
      conditionNames: ["import", "require", "node", "default", "types"],
    },
  },
};
