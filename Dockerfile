# syntax=docker/dockerfile:1
#
# One image for all six apps (decisions section 1, distributed mode). Pick the app with the
# command: `node dist/apps/<app>/main.js` (gateway, patient-pathway, case-ledger, conversation,
# workflow-engine, webhook-dispatcher). The default command runs the standalone process.
#
#   docker build -t patient-care-service:local .

############################ build ############################
FROM node:20-bookworm-slim AS build
WORKDIR /app

# better-sqlite3 (and a few optional native modules) compile from source when no prebuilt
# binary matches: give node-gyp its toolchain in this stage only.
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ ca-certificates \
 && rm -rf /var/lib/apt/lists/*

# Dependencies first, so source edits reuse this layer. Dev dependencies are needed to build
# (typescript, tsc-alias); they are pruned below.
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund

# Sources (what .dockerignore lets through: apps, libs, bench, scripts, configs).
COPY . .
RUN npm run build \
 && npm prune --omit=dev --no-audit --no-fund

############################ runtime ############################
FROM node:20-bookworm-slim AS runtime
# No HOST: in production mode (dev tools off) the apps listen on 0.0.0.0. With the dev tools on they
# listen on 127.0.0.1 unless HOST is set, so a container that runs them needs HOST=0.0.0.0 on purpose.
# Production mode also needs WIDGET_BASE_URL (https) and, with MAIL=smtp, an SMTP_URL over TLS.
ENV NODE_ENV=production \
    PORT=3000 \
    SVC_DATA_DIR=/app/data
WORKDIR /app

# Production dependencies (native modules already compiled for this same base image) and the build.
COPY --from=build --chown=node:node /app/package.json /app/package-lock.json ./
COPY --from=build --chown=node:node /app/node_modules ./node_modules
COPY --from=build --chown=node:node /app/dist ./dist
RUN mkdir -p /app/data && chown node:node /app/data

USER node
EXPOSE 3000
# GET /api/healthz answers 200 while the process runs (GET /api/readyz also checks its stores and bus).
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=5 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||3000)+'/api/healthz').then(r=>process.exit(r.status===200?0:1),()=>process.exit(1))"]
CMD ["node", "--max-semi-space-size=64", "dist/apps/standalone/main.js"]
