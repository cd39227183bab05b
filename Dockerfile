# syntax=docker/dockerfile:1
#
# One image for the API and the Temporal worker (the worker only overrides the
# command), plus a `migrate` target that keeps the Prisma CLI for
# `prisma migrate deploy`. Build targets:
#
#   docker build -t durable-knowledge-backend .                  # runtime (API by default)
#   docker build --target migrate -t durable-knowledge-migrate .  # one-shot migrations
#
# docker-compose.temporal.yml builds both.

# ---------------------------------------------------------------------------
# base: Node 24 LTS on Debian bookworm (slim). openssl is installed so Prisma
# detects the right OpenSSL (3.x) for its schema engine; ca-certificates for
# outbound TLS (OpenAI-compatible APIs).
# ---------------------------------------------------------------------------
FROM node:24-bookworm-slim AS base
ENV NPM_CONFIG_UPDATE_NOTIFIER=false \
    NPM_CONFIG_FUND=false \
    NPM_CONFIG_AUDIT=false \
    ONNXRUNTIME_NODE_INSTALL=skip
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates openssl \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app

# ---------------------------------------------------------------------------
# deps: full install (dev dependencies included) — the Prisma CLI is a dev
# dependency and is needed for `generate` and `migrate deploy`.
# ---------------------------------------------------------------------------
FROM base AS deps
COPY package.json package-lock.json ./
RUN --mount=type=cache,target=/root/.npm npm ci

# ---------------------------------------------------------------------------
# build: generate the Prisma client into ./generated (git-ignored, so it must
# be produced here). `prisma generate` does not connect to the database, but
# the Prisma config may insist that DATABASE_URL is set, so a placeholder is
# given to this one command only; it never reaches the final image.
# ---------------------------------------------------------------------------
FROM deps AS build
COPY . .
RUN DATABASE_URL="postgresql://build:build@localhost:5432/build" bash scripts/prisma.sh generate

# ---------------------------------------------------------------------------
# prod-deps: production dependencies only. tsx is a runtime dependency (the
# services run TypeScript directly with `node --import tsx`), so there is no
# separate compile step.
# ---------------------------------------------------------------------------
FROM base AS prod-deps
COPY package.json package-lock.json ./
RUN --mount=type=cache,target=/root/.npm npm ci --omit=dev

# ---------------------------------------------------------------------------
# migrate: one-shot `prisma migrate deploy` (compose service `migrate`). It
# keeps the dev dependencies because it needs the Prisma CLI; it is never
# used to serve traffic.
# ---------------------------------------------------------------------------
FROM build AS migrate
ENV NODE_ENV=production
USER node
CMD ["bash", "scripts/prisma.sh", "migrate", "deploy"]

# ---------------------------------------------------------------------------
# runtime: API (default CMD) and worker (`node --import tsx workers/main.ts`).
# The Debian packages the services shell out to are exactly
# scripts/runtime-packages.txt (the list scripts/setup.sh installs too):
# poppler, antiword/catdoc, LibreOffice (-nogui), tesseract with the OCR
# languages, ffmpeg, pocketsphinx, flite, espeak-ng, festival with the HTS
# voice, kakasi (Japanese kana for espeak-ng). Besides them only tini,
# PID 1: it forwards SIGTERM so the API drains and the worker shuts down cleanly.
# ---------------------------------------------------------------------------
FROM base AS runtime
COPY scripts/runtime-packages.txt /tmp/runtime-packages.txt
RUN apt-get update \
 && grep -v '^#' /tmp/runtime-packages.txt | xargs apt-get install -y --no-install-recommends tini \
 && rm -rf /var/lib/apt/lists/* /tmp/runtime-packages.txt

ENV NODE_ENV=production \
    PORT=3000 \
    STORAGE_DIR=/var/lib/knowledge/storage

# Application files stay owned by root (read-only for the service user); only
# the storage directory is writable. A named volume mounted there inherits
# this ownership on first use.
COPY . .
COPY --from=prod-deps /app/node_modules ./node_modules
COPY --from=build /app/generated ./generated
# The local speech-to-text weights (Moonshine base), by exact version and integrity hash.
ENV TRANSCRIPTION_LOCAL_MODEL_DIR=/opt/models/moonshine-base-0.1.15
RUN DWB_TOOLS_DIR=/opt/models bash scripts/fetch-models.sh
RUN mkdir -p /var/lib/knowledge/storage \
 && chown node:node /var/lib/knowledge/storage

# The official Node image ships the unprivileged `node` user (uid 1000).
USER node
EXPOSE 3000
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["node", "--max-semi-space-size=64", "--import", "tsx", "api/server.ts"]
