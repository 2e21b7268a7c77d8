# agentd in a container, on Node 24 (the current LTS line).
#   docker build -t agentd .
#   docker run -p 8000:8000 -v agentd-data:/data -e AGENTD_MASTER_KEY=change-me \
#     --security-opt seccomp=deploy/seccomp-agentd.json --security-opt systempaths=unconfined \
#     --device /dev/net/tun agentd
# (plus --security-opt apparmor=unconfined on AppArmor hosts; podman: --security-opt unmask=/proc/*
# --device /dev/net/tun). Without these the agent's sandbox cannot start and neither does the
# server; AGENTD_SANDBOX=none runs the agent unsandboxed instead (docs/deploy.md).

# Build: dev dependencies, TypeScript → dist/ (with the prompts and tool descriptions beside it),
# the server bundled into dist/cli.js and its chunks (scripts/build-server.mjs).
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY scripts ./scripts
COPY src ./src
RUN npm run build

# Production dependencies only.
FROM node:24-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund

# Runtime: what the agent's tools use (bash, git, ripgrep, ps, bubblewrap), and tini as PID 1 so
# that processes the agent leaves behind are reaped and signals reach the server.
FROM node:24-bookworm-slim
RUN apt-get update \
  && apt-get install -y --no-install-recommends bash bubblewrap ca-certificates git passt procps ripgrep slirp4netns tini util-linux \
  && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
RUN mkdir -p /data && chown node:node /data
USER node
# AGENTD_SANDBOX=bwrap: a container that cannot sandbox the agent refuses to start rather than run it unsandboxed.
# glibc's malloc returns freed blocks of 128 KiB and more at once instead of keeping them (docs/operations.md, "Memory").
ENV NODE_ENV=production \
    GLIBC_TUNABLES=glibc.malloc.mmap_threshold=131072 \
    AGENTD_HOST=0.0.0.0 \
    AGENTD_SANDBOX=bwrap \
    AGENTD_PORT=8000 \
    AGENTD_DATA_DIR=/data
VOLUME /data
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
  CMD ["node", "-e", "fetch(`http://127.0.0.1:${process.env.AGENTD_PORT}/alive`).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
ENTRYPOINT ["/usr/bin/tini", "--"]
# The Node options of scripts/perf/server-node-flags.mjs (docs/operations.md, "Memory").
CMD ["node", "--max-semi-space-size=8", "dist/cli.js"]
