# The production image of the service (docs/deploy.md). Three stages:
#   deps   production dependencies only (`npm ci --omit=dev`), native addons (better-sqlite3) compiled here
#   build  every dependency, then the service (`npm run build`, into dist/) and the web panel (`npm run build:panel`)
#   final  node:20-bookworm-slim with deps' node_modules, dist/ and panel/dist/: no compiler, no dev dependency, no source;
#          runs as the unprivileged `node` user; HEALTHCHECK asks /readyz (deploy/docker/healthcheck.mjs).
# Roles by environment: ROLE=all (default), or api, worker, webhooks, or a comma list (docs/configuration.md).
# test/repo/dockerfile.test.ts checks this file and runs the final stage's commands without Docker.

FROM node:20-bookworm-slim AS deps
RUN apt-get update && apt-get install -y --no-install-recommends python3 make g++ && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json ./
# `prepare` builds the service and the panel with dev dependencies: the build stage does that, not this one.
RUN npm pkg delete scripts.prepare && npm ci --omit=dev --no-audit --no-fund && npm cache clean --force

FROM node:20-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY . .
RUN npm run build && npm run build:panel

FROM node:20-bookworm-slim AS final
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8080 \
    GRPC_PORT=8081 \
    METRICS_PORT=9464 \
    ROLE=all \
    DATA_DIR=/data
WORKDIR /app
COPY --from=deps /app/package.json ./package.json
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /src/dist ./dist
COPY --from=build /src/panel/dist ./panel/dist
COPY deploy/docker/healthcheck.mjs ./healthcheck.mjs
RUN mkdir -p /data && chown node:node /data
USER node
VOLUME ["/data"]
EXPOSE 8080 8081 9464
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 CMD ["node", "healthcheck.mjs"]
CMD ["node", "--max-semi-space-size=8", "--heap-growing-percent=50", "dist/src/main.js"]
