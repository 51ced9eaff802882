#!/usr/bin/env bash
# herald's growth target: enqueue and claim rates with 1,000,000 finished notifications stored
# should be at least 0.9 × the rates on empty tables.
#
# For each database (PostgreSQL and SQLite by default), in one invocation:
#   1. a scratch database that herald migrates (`herald migrate`), then filled with --stored
#      finished notifications written by SQL as herald would have left them: delivered at the
#      first attempt through the sandbox route, each with its attempt row, its idempotency key
#      and its two outbox events published to the relay's `log` sink (or, with
#      --outbox deleted, those events already removed by the relay's retention). See
#      bench/growth-postgres.sql and bench/growth-sqlite.py for the rows;
#   2. `herald bench` on a second, empty scratch database;
#   3. `herald bench` on the filled one, right after, so that both figures come from one run.
# The summary's ratios are filled ÷ empty for single enqueue/s, batch enqueue/s and
# delivered/s (the drain, where every delivery starts with a claim), against the target 0.9.
#
# Usage:
#   cargo build --release
#   bench/growth.sh [--stored 1000000] [--backend both|postgres|sqlite] [-- <herald bench args>]
#   bench/growth.sh --stored 20000 -- --notifications 2000 --latency-seconds 3    # a smoke run
#   bench/growth.sh --help
#
# Needs: bash, node (for the summary), psql and a PostgreSQL server that lets --server's role
# create databases (PostgreSQL), python3 with its sqlite3 module (SQLite). Progress goes to
# stderr, a JSON summary to stdout. Scratch databases (herald_growth_<pid>_…) and the scratch
# folder are removed on exit, whatever the outcome.

set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")

server=${HERALD_BENCH_SERVER:-postgres://postgres@127.0.0.1:5432}
stored=1000000
backend=both
span_days=7
outbox=published
herald_bin=$repo/target/release/herald
bench_args=()

usage() {
    cat <<EOF
Usage: bench/growth.sh [options] [-- herald bench options]

  --stored N           finished notifications in the filled database (default $stored)
  --backend B          postgres, sqlite or both (default $backend)
  --server URL         PostgreSQL server, without a database name
                       (default: \$HERALD_BENCH_SERVER or $server)
  --span-days D        the stored notifications were created over the D days before now
                       (default $span_days, herald's default idempotency-key retention)
  --outbox WHAT        published: keep both events of each notification, published to the
                       log sink; deleted: none left, as after the relay's retention
                       (default $outbox)
  --herald-bin PATH    the herald binary (default target/release/herald)

Everything after -- goes to both herald bench runs (e.g. --notifications 2000).
EOF
}

while (($#)); do
    case $1 in
        --stored) stored=$2; shift 2 ;;
        --backend) backend=$2; shift 2 ;;
        --server) server=${2%/}; shift 2 ;;
        --span-days) span_days=$2; shift 2 ;;
        --outbox) outbox=$2; shift 2 ;;
        --herald-bin) herald_bin=$2; shift 2 ;;
        --) shift; bench_args=("$@"); break ;;
        -h | --help) usage; exit 0 ;;
        *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
    esac
done

for n in stored span_days; do
    [[ ${!n} =~ ^[1-9][0-9]*$ ]] || { echo "--${n//_/-} must be a whole number ≥ 1" >&2; exit 2; }
done
case $backend in
    both) backends=(postgres sqlite) ;;
    postgres | sqlite) backends=("$backend") ;;
    *) echo "--backend must be postgres, sqlite or both" >&2; exit 2 ;;
esac
case $outbox in
    published) keep_outbox=true ;;
    deleted) keep_outbox=false ;;
    *) echo "--outbox must be published or deleted" >&2; exit 2 ;;
esac

say() { echo "growth: $*" >&2; }

need=(node)
for b in "${backends[@]}"; do
    case $b in
        postgres) need+=(psql) ;;
        sqlite) need+=(python3) ;;
    esac
done
me=growth
source "$here/scratch.sh"
require_tools "${need[@]}"
require_herald "$herald_bin"

# A new empty database for backend $1, named $2; its URL goes to $url.
new_database() {
    case $1 in
        postgres)
            local db="herald_growth_$$_$2"
            databases+=("$db")
            admin -c "CREATE DATABASE \"$db\"" >/dev/null
            url=$server/$db
            ;;
        sqlite)
            mkdir -p "$scratch/$2"
            url=sqlite://$scratch/$2/herald.db
            ;;
    esac
}

# herald's own migrations, as `herald serve` would apply them.
migrate() {
    env -u HERALD_CONFIG HERALD_DATABASE__URL="$1" "$herald_bin" migrate >/dev/null
}

database_bytes() {
    case $1 in
        postgres) psql "$2" -qAtX -c "SELECT pg_database_size(current_database())" ;;
        sqlite) stat -c %s "${2#sqlite://}" ;;
    esac
}

fill() {
    local backend=$1 url=$2 started=$SECONDS
    say "$backend: storing $stored finished notifications (outbox: $outbox)"
    case $backend in
        postgres)
            psql "$url" -qX -v ON_ERROR_STOP=1 -v stored="$stored" -v span_days="$span_days" \
                -v keep_outbox="$keep_outbox" -f "$here/growth-postgres.sql" >/dev/null
            # A quiet start for the measurement: the fill's dirty pages written out (needs a
            # superuser or pg_checkpoint; skipped where refused).
            admin -c "CHECKPOINT" >/dev/null 2>&1 || say "CHECKPOINT refused; going on"
            ;;
        sqlite)
            python3 "$here/growth-sqlite.py" "${url#sqlite://}" "$stored" "$span_days" "$keep_outbox"
            ;;
    esac
    fill_seconds=$((SECONDS - started))
    say "$backend: stored in ${fill_seconds} s"
}

bench() {
    local label=$1 url=$2 out=$3
    say "$label: herald bench ${bench_args[*]}"
    "$herald_bin" bench --database-url "$url" ${bench_args[@]+"${bench_args[@]}"} >"$out"
}

results=$scratch/results.jsonl
for backend in "${backends[@]}"; do
    new_database "$backend" filled
    filled_url=$url
    migrate "$filled_url"
    fill "$backend" "$filled_url"
    filled_bytes=$(database_bytes "$backend" "$filled_url")

    new_database "$backend" empty
    empty_url=$url
    bench "$backend, empty" "$empty_url" "$scratch/$backend-empty.json"
    bench "$backend, $stored stored" "$filled_url" "$scratch/$backend-filled.json"
    printf '{"backend":"%s","fill_seconds":%d,"filled_database_bytes":%d,"empty":%s,"filled":%s}\n' \
        "$backend" "$fill_seconds" "$filled_bytes" \
        "$(tr -d '\n' <"$scratch/$backend-empty.json")" \
        "$(tr -d '\n' <"$scratch/$backend-filled.json")" >>"$results"
done

node - "$results" <<EOF
const fs = require("node:fs");
const lines = fs.readFileSync(process.argv[2], "utf8").trim().split("\n");
const target = 0.9;
const figures = (b) => ({
  single_per_second: b.accepted_per_second.single,
  batch_per_second: b.accepted_per_second.batch,
  delivered_per_second: b.delivered_per_second,
});
const summary = {
  stored: $stored,
  span_days: $span_days,
  outbox: "$outbox",
  target,
};
for (const line of lines) {
  const r = JSON.parse(line);
  const empty = figures(r.empty);
  const filled = figures(r.filled);
  const ratios = {};
  for (const [name, value] of Object.entries(filled)) {
    const ratio = Math.round((value / empty[name]) * 100) / 100;
    ratios[name.replace("_per_second", "")] = { value: ratio, met: ratio >= target };
  }
  summary[r.backend] = {
    fill_seconds: r.fill_seconds,
    filled_database_bytes: r.filled_database_bytes,
    empty,
    filled,
    ratios,
    bench: { empty: r.empty, filled: r.filled },
  };
}
process.stdout.write(JSON.stringify(summary, null, 2) + "\n");
EOF
