"""The dedicated PostgreSQL database a benchmark runs in, dropped and re-created each run.

`BENCH_DATABASE_URL` when set, else the server of `DATABASE_URL` (default 127.0.0.1:5432,
user postgres) with the benchmark's own database name.
"""

import os
import sys


def database_url(name):
    import dj_database_url

    url = os.environ.get("BENCH_DATABASE_URL")
    if url:
        return url
    config = dj_database_url.parse(os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres"))
    if "postgresql" not in config["ENGINE"]:
        sys.exit("this benchmark needs PostgreSQL: set BENCH_DATABASE_URL or DATABASE_URL to a postgres:// URL")
    user = config.get("USER") or "postgres"
    password = f":{config['PASSWORD']}" if config.get("PASSWORD") else ""
    return f"postgres://{user}{password}@{config.get('HOST') or '127.0.0.1'}:{config.get('PORT') or 5432}/{name}"


def recreate_database(url):
    import dj_database_url
    import psycopg

    config = dj_database_url.parse(url)
    admin = psycopg.connect(
        host=config["HOST"], port=config["PORT"], user=config["USER"], password=config["PASSWORD"] or None,
        dbname="postgres", autocommit=True,
    )
    admin.execute(f'DROP DATABASE IF EXISTS "{config["NAME"]}" WITH (FORCE)')
    admin.execute(f'CREATE DATABASE "{config["NAME"]}"')
    admin.close()
