// The image's HEALTHCHECK: GET /readyz of this process, 0 when it answers 200, 1 otherwise. A process with the `api`
// role answers on PORT; a worker or webhook process on METRICS_PORT (src/transport/http/metrics-server.ts).
const roles = (process.env.ROLE || "all").split(",").map((role) => role.trim());
const port = roles.includes("all") || roles.includes("api") ? process.env.PORT || "8080" : process.env.METRICS_PORT || "9464";
try {
  const response = await fetch(`http://127.0.0.1:${port}/readyz`, { signal: AbortSignal.timeout(2500) });
  process.exit(response.status === 200 ? 0 : 1);
} catch {
  process.exit(1);
}
