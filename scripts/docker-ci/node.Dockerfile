# CI's stand-in for node:20-bookworm-slim: the debootstrapped bookworm minbase (imported as
# toolgraph-ci/bookworm-minbase), this machine's Node 20 and npm laid out like the official image's
# (/usr/local/bin, /usr/local/lib/node_modules/npm, /usr/local/include/node), and a `node` user, uid 1000.
FROM toolgraph-ci/bookworm-minbase
COPY node /usr/local/bin/node
COPY npm /usr/local/lib/node_modules/npm
COPY include /usr/local/include/node
# This machine's HTTPS is re-signed by a local CA: node and npm inside trust the system bundle.
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
RUN ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \
 && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx \
 && groupadd --gid 1000 node \
 && useradd --uid 1000 --gid node --shell /bin/bash --create-home node \
 && node --version && npm --version
# node-gyp builds better-sqlite3 against the headers above instead of downloading them.
ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt \
    npm_config_cafile=/etc/ssl/certs/ca-certificates.crt \
    npm_config_nodedir=/usr/local \
    npm_config_update_notifier=false
CMD ["node"]
