# toolgraph: the API and dashboard with the embedded SQLite store.
# Untested here (no Docker engine on the build machines); linted by tests/docker.test.ts.

# --- build: compile TypeScript and better-sqlite3's native addon -------------------------------
FROM node:20-bookworm-slim AS build
WORKDIR /app
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json tsconfig.json tsconfig.build.json ./
COPY scripts ./scripts
COPY src ./src
COPY bin ./bin
RUN npm ci --no-audit --no-fund \
 && npm prune --omit=dev --no-audit --no-fund

# --- run: only what the service needs, as a non-root user --------------------------------------
FROM node:20-bookworm-slim
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build --chown=node:node /app/package.json ./
COPY --from=build --chown=node:node /app/node_modules ./node_modules
COPY --from=build --chown=node:node /app/dist ./dist
COPY --from=build --chown=node:node /app/bin ./bin
RUN mkdir -p /data && chown node:node /data
USER node
EXPOSE 8080
VOLUME ["/data"]
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:8080/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# Listening beyond loopback needs auth.keys in the config (open mode serves loopback only).
ENTRYPOINT ["node", "bin/toolgraph.mjs"]
CMD ["serve", "--config", "/config/toolgraph.yaml", "--host", "0.0.0.0", "--port", "8080", "--db", "/data/toolgraph.db"]
