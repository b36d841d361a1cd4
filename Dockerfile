# toolgraph: the API and dashboard with the embedded SQLite store.
# CI builds this file unchanged and runs the image (scripts/docker-ci.sh; docs/operations.md).

# --- build: compile TypeScript and better-sqlite3's native addon -------------------------------
FROM node:20-bookworm-slim AS build
WORKDIR /app
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json tsconfig.json tsconfig.build.json ./
COPY scripts/copy-assets.mjs ./scripts/copy-assets.mjs
COPY src ./src
COPY bin ./bin
# Keep only the compiled addon of better-sqlite3: its sources, the SQLite amalgamation and the
# object files are build leftovers (about 28 MB).
RUN npm ci --no-audit --no-fund \
 && npm prune --omit=dev --no-audit --no-fund \
 && cd node_modules/better-sqlite3 \
 && mv build/Release/better_sqlite3.node /tmp/ \
 && rm -rf build deps src binding.gyp \
 && mkdir -p build/Release \
 && mv /tmp/better_sqlite3.node build/Release/ \
 && cd /app && find dist -name '*.map' -delete

# --- run: only what the service needs, as a non-root user --------------------------------------
FROM node:20-bookworm-slim
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build --chown=node:node /app/package.json ./
COPY --from=build --chown=node:node /app/node_modules ./node_modules
COPY --from=build --chown=node:node /app/dist ./dist
COPY --from=build --chown=node:node /app/bin ./bin
COPY scripts/docker-entrypoint.sh /usr/local/bin/toolgraph-entrypoint
RUN mkdir -p /data && chown node:node /data
USER node
EXPOSE 8080
VOLUME ["/data"]
HEALTHCHECK --interval=10s --timeout=8s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:8080/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
STOPSIGNAL SIGTERM
# Listening beyond loopback needs auth.keys in the config (open mode serves loopback only).
# The entrypoint checks that the database's directory is writable (a root-owned bind mount is not)
# and says what to do. The drain (8 s) ends before `docker stop`'s default 10 s grace period.
ENTRYPOINT ["toolgraph-entrypoint"]
CMD ["serve", "--config", "/config/toolgraph.yaml", "--host", "0.0.0.0", "--port", "8080", "--db", "/data/toolgraph.db", "--drain-ms", "8000"]
