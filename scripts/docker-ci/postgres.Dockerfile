# CI's stand-in for postgres:15, from Debian's postgresql-15: it honours POSTGRES_USER,
# POSTGRES_PASSWORD and POSTGRES_DB on first start, keeps PGDATA at /var/lib/postgresql/data, listens on
# 5432 with password (scram) auth, and has pg_isready on the PATH, like the official image.
FROM toolgraph-ci/bookworm-minbase
RUN apt-get update \
 && apt-get install -y --no-install-recommends postgresql-15 \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /var/lib/postgresql/data /var/run/postgresql \
 && chown -R postgres:postgres /var/lib/postgresql /var/run/postgresql
ENV PATH=/usr/lib/postgresql/15/bin:$PATH \
    PGDATA=/var/lib/postgresql/data
COPY postgres-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
VOLUME ["/var/lib/postgresql/data"]
EXPOSE 5432
STOPSIGNAL SIGINT
ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]
CMD ["postgres"]
