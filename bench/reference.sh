#!/usr/bin/env bash
# Reference figures for herald's PostgreSQL performance targets, measured in one invocation on
# one server, so that herald's own figures can be read as ratios rather than absolute numbers
# (the machine that runs them is shared and noisy).
#
# What it measures, each run on fresh scratch databases:
#
#   pgbench, enqueue     The transaction one herald single enqueue commits, statement for
#                        statement and round trip for round trip (see bench/enqueue.pgbench.sql):
#                        BEGIN; claim the idempotency key; insert the notification; insert its
#                        `accepted` outbox event; pg_notify; COMMIT. Schema from
#                        migrations/postgres/*.sql. Reported as transactions (= enqueues) per
#                        second at --clients connections for --duration seconds, -M prepared
#                        (sqlx prepares and caches every statement too).
#   pgbench, one statement
#                        The same rows written by one statement in autocommit (writable CTEs;
#                        bench/enqueue-one-statement.pgbench.sql): the same work with one round
#                        trip and one commit instead of six.
#   pgbench, enqueue without pg_notify (--without-notify only)
#                        The enqueue transaction minus its pg_notify: what herald's wake-up
#                        costs. PostgreSQL serializes the commits of all transactions that
#                        NOTIFY: they queue for one heavyweight lock for the whole server
#                        (async.c's lock on "database 0"), held until the commit, WAL flush
#                        included, is done. With many clients this can differ a lot.
#   graphile-worker      A pinned graphile-worker (installed with npm into a scratch folder,
#                        never into the repository): --jobs jobs added with WorkerUtils.addJobs
#                        in chunks of 1,000, then drained by one worker process running a task
#                        that does nothing, tuned as its performance page recommends (local
#                        queue, batched completion). See bench/graphile.mjs.
#   graphile-worker, HTTP
#                        The same, with a task that does a delivery's network work: one POST of
#                        the message to the sandbox vendor (a `herald sandbox` process started
#                        for it, as herald bench starts its own), at --clients concurrent jobs,
#                        herald bench's concurrency. The fair peer for herald's delivered rate.
#   herald (--herald)    `herald bench --database-url <scratch PostgreSQL database>`, so that
#                        the ratios below come from the same run as their references.
#
# With --herald, the summary has the ratios of herald's performance targets:
#   single enqueue/s   ÷ pgbench enqueue tx/s            target ≥ 1.0
#   batch enqueue/s    ÷ graphile-worker addJobs/s       target ≥ 0.5
#   delivered/s        ÷ graphile-worker, HTTP task/s    target ≥ 1.0
#   delivered/s        ÷ graphile-worker, no-op jobs/s   (no target: a no-op does no I/O)
#   PostgreSQL CPU per delivered notification ÷ per graphile-worker HTTP job
#                                                        target ≤ 3.0
# (PostgreSQL's CPU is every `postgres` process's user and system time from /proc over each
# drain window, read by herald bench and bench/graphile.mjs alike: the server must be on this
# machine for it. It is what bounds scale-out: herald processes are stateless, and the database
# is the one part they share.)
# With --runs N every figure is the median of N runs (and each run's figures are listed too).
#
# Usage:
#   cargo build --release                  # herald: the sandbox vendor, and --herald
#   bench/reference.sh [--herald] [--runs 3] [--clients 32] [--duration 20] [--jobs 20000]
#   bench/reference.sh --herald --duration 5 --jobs 5000 --notifications 2000   # a smoke run
#   bench/reference.sh --help
#
# Needs: bash, psql, pgbench, node ≥ 18 with npm (and the npm registry) on PATH; a PostgreSQL
# server that lets the --server role create databases. Progress goes to stderr, one JSON
# summary to stdout. Scratch databases (herald_ref_<pid>_…) and the scratch folder
# (under ${HERALD_BENCH_SCRATCH:-$TMPDIR}) are removed on exit, whatever the outcome.

set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")

server=${HERALD_BENCH_SERVER:-postgres://postgres@127.0.0.1:5432}
clients=32
threads=2
duration=20
jobs=20000
notifications=20000
runs=1
with_herald=false
without_notify=false
skip_graphile=false
herald_bin=$repo/target/release/herald
gw_version=0.17.3
gw_concurrency=24
gw_local_queue=500
gw_batch_delay=0
gw_add_parallel=4
herald_args=()

usage() {
    cat <<EOF
Usage: bench/reference.sh [options] [-- herald bench options]

  --server URL           PostgreSQL server, without a database name
                         (default: \$HERALD_BENCH_SERVER or $server)
  --clients N            pgbench connections, and herald bench --concurrency (default $clients)
  --threads N            pgbench worker threads (default $threads)
  --duration S           seconds per pgbench measurement (default $duration)
  --jobs N               graphile-worker jobs to add and drain (default $jobs, herald bench's
                         default --notifications)
  --notifications N      herald bench --notifications, with --herald (default $notifications)
  --runs N               repeat everything N times; the summary has medians (default $runs)
  --herald               also run herald bench on a scratch PostgreSQL database, and print ratios
  --without-notify       also run the enqueue transaction without its pg_notify
  --herald-bin PATH      the herald binary (default target/release/herald)
  --skip-graphile        leave graphile-worker out (no npm install, no herald binary needed
                         without --herald)
  --gw-version V         graphile-worker version to install (default $gw_version)
  --gw-concurrency N     graphile-worker concurrentJobs (default $gw_concurrency)
  --gw-local-queue N     graphile-worker localQueue.size; -1 turns it off (default $gw_local_queue)
  --gw-batch-delay MS    completeJobBatchDelay and failJobBatchDelay; -1 turns batching off
                         (default $gw_batch_delay)
  --gw-add-parallel N    addJobs calls in flight at once (default $gw_add_parallel, as herald
                         bench's batch phase, which uses at most 4 connections)

Everything after -- goes to herald bench (e.g. --latency-seconds 5).
EOF
}

while (($#)); do
    case $1 in
        --server) server=${2%/}; shift 2 ;;
        --clients) clients=$2; shift 2 ;;
        --threads) threads=$2; shift 2 ;;
        --duration) duration=$2; shift 2 ;;
        --jobs) jobs=$2; shift 2 ;;
        --notifications) notifications=$2; shift 2 ;;
        --runs) runs=$2; shift 2 ;;
        --herald) with_herald=true; shift ;;
        --without-notify) without_notify=true; shift ;;
        --herald-bin) herald_bin=$2; shift 2 ;;
        --skip-graphile) skip_graphile=true; shift ;;
        --gw-version) gw_version=$2; shift 2 ;;
        --gw-concurrency) gw_concurrency=$2; shift 2 ;;
        --gw-local-queue) gw_local_queue=$2; shift 2 ;;
        --gw-batch-delay) gw_batch_delay=$2; shift 2 ;;
        --gw-add-parallel) gw_add_parallel=$2; shift 2 ;;
        --) shift; herald_args=("$@"); break ;;
        -h | --help) usage; exit 0 ;;
        *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
    esac
done

for n in clients threads duration jobs notifications runs gw_concurrency gw_add_parallel; do
    [[ ${!n} =~ ^[1-9][0-9]*$ ]] || { echo "--${n//_/-} must be a whole number ≥ 1" >&2; exit 2; }
done

say() { echo "reference: $*" >&2; }

need=(psql pgbench node)
$skip_graphile || need+=(npm curl)
me=reference
source "$here/scratch.sh"
require_tools "${need[@]}"
if $with_herald || ! $skip_graphile; then
    require_herald "$herald_bin"
fi

# A new empty database, named in $db (set here, not printed: a subshell's list of databases
# would not reach the trap).
scratch_db() {
    db="herald_ref_$$_$1"
    databases+=("$db")
    admin -c "CREATE DATABASE \"$db\"" >/dev/null
}

# Dirty pages of earlier phases written out before a measurement, so that no phase pays for
# another's checkpoint (needs a superuser or pg_checkpoint; skipped where refused).
checkpoint() {
    admin -c "CHECKPOINT" >/dev/null 2>&1 || say "CHECKPOINT refused; going on without"
}

drop_db() {
    admin -c "DROP DATABASE IF EXISTS \"$1\" WITH (FORCE)" >/dev/null
}

# herald's schema, from its own migrations in order, plus the UUIDv7 generator the pgbench
# scripts use for ids (herald's ids are UUIDv7, so its inserts land at the right edge of each
# index; random v4 ids would not).
herald_schema() {
    local migration
    for migration in "$repo"/migrations/postgres/*.sql; do
        psql "$server/$1" -qAtX -v ON_ERROR_STOP=1 --single-transaction -f "$migration" >/dev/null
    done
    psql "$server/$1" -qAtX -v ON_ERROR_STOP=1 -f "$here/uuid7.sql" >/dev/null
}

# Runs one pgbench script on a fresh copy of herald's schema; its tx/s go to $tps.
pgbench_tps() {
    local name=$1 script=$2 run=$3 out failed
    scratch_db "pgbench_${name}_$run"
    herald_schema "$db"
    checkpoint
    say "run $run: pgbench $name, $clients clients, ${duration} s"
    if ! out=$(pgbench "$server/$db" --no-vacuum --protocol=prepared --client="$clients" \
        --jobs="$threads" --time="$duration" --file="$script" 2>&1); then
        echo "$out" >&2
        echo "reference: pgbench $name failed" >&2
        exit 1
    fi
    tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' <<<"$out")
    failed=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' <<<"$out")
    if [[ -z $tps || ${failed:-0} != 0 ]]; then
        echo "$out" >&2
        echo "reference: pgbench $name did not report a clean run" >&2
        exit 1
    fi
    say "run $run: pgbench $name: $tps tx/s ($(sed -n 's/^latency average = //p' <<<"$out") average)"
    drop_db "$db"
}

install_graphile() {
    say "installing graphile-worker@$gw_version into $scratch/graphile"
    mkdir -p "$scratch/graphile"
    echo '{"name":"herald-reference-scratch","private":true}' >"$scratch/graphile/package.json"
    (cd "$scratch/graphile" &&
        npm install --no-audit --no-fund --loglevel=error "graphile-worker@$gw_version" >&2)
}

# graphile-worker's summary goes to the file $2; $3 is the task (noop, or http to the sandbox
# vendor at $vendor_url, at --clients concurrent jobs as herald bench's dispatch).
graphile_run() {
    local run=$1 task=$3 concurrency=$gw_concurrency
    local extra=()
    if [[ $task == http ]]; then
        concurrency=$clients
        extra=(--target "$vendor_url")
    fi
    scratch_db "graphile_${task}_$run"
    checkpoint
    say "run $run: graphile-worker, $jobs $task jobs"
    node "$here/graphile.mjs" --module-dir "$scratch/graphile" --database-url "$server/$db" \
        --jobs "$jobs" --add-parallel "$gw_add_parallel" --concurrency "$concurrency" \
        --local-queue "$gw_local_queue" --batch-delay "$gw_batch_delay" --task "$task" \
        ${extra[@]+"${extra[@]}"} >"$2"
    drop_db "$db"
}

# The sandbox vendor for the HTTP task, in a process of its own as herald bench runs its own;
# the exit trap stops it.
start_vendor() {
    local port
    port=$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
    vendor_url="http://127.0.0.1:$port"
    "$herald_bin" sandbox --listen "127.0.0.1:$port" >"$scratch/vendor.log" 2>&1 &
    children+=($!)
    for _ in $(seq 100); do
        curl -fsS "$vendor_url/profile" >/dev/null 2>&1 && return
        sleep 0.1
    done
    echo "reference: the sandbox vendor did not start (see $scratch/vendor.log)" >&2
    exit 1
}

# herald bench's summary goes to the file $2.
herald_run() {
    local run=$1
    scratch_db "herald_$run"
    checkpoint
    say "run $run: herald bench, $notifications notifications"
    "$herald_bin" bench --database-url "$server/$db" --notifications "$notifications" \
        --concurrency "$clients" ${herald_args[@]+"${herald_args[@]}"} >"$2"
    drop_db "$db"
}

if ! $skip_graphile; then
    install_graphile
    start_vendor
fi
server_version=$(admin -c "SHOW server_version")

# One JSON object per run, one per line.
results=$scratch/runs.jsonl
for ((run = 1; run <= runs; run++)); do
    pgbench_tps enqueue "$here/enqueue.pgbench.sql" "$run"
    enqueue=$tps
    pgbench_tps one_statement "$here/enqueue-one-statement.pgbench.sql" "$run"
    one=$tps
    quiet=null
    if $without_notify; then
        grep -v '^SELECT pg_notify' "$here/enqueue.pgbench.sql" >"$scratch/enqueue-without-notify.sql"
        pgbench_tps enqueue_without_notify "$scratch/enqueue-without-notify.sql" "$run"
        quiet=$tps
    fi
    echo null >"$scratch/graphile.json"
    echo null >"$scratch/graphile_http.json"
    if ! $skip_graphile; then
        graphile_run "$run" "$scratch/graphile.json" noop
        graphile_run "$run" "$scratch/graphile_http.json" http
    fi
    echo null >"$scratch/herald.json"
    if $with_herald; then
        herald_run "$run" "$scratch/herald.json"
    fi
    printf '{"run":%d,"pgbench":{"enqueue_tps":%s,"one_statement_tps":%s,"enqueue_without_notify_tps":%s},"graphile_worker":%s,"graphile_worker_http":%s,"herald":%s}\n' \
        "$run" "$enqueue" "$one" "$quiet" "$(tr -d '\n' <"$scratch/graphile.json")" \
        "$(tr -d '\n' <"$scratch/graphile_http.json")" "$(tr -d '\n' <"$scratch/herald.json")" >>"$results"
done

# Medians and ratios.
node - "$results" <<EOF
const fs = require("node:fs");
const runs = fs.readFileSync(process.argv[2], "utf8").trim().split("\n").map((l) => JSON.parse(l));
const median = (values) => {
  const v = values.filter((x) => typeof x === "number").sort((a, b) => a - b);
  if (v.length === 0) return null;
  const m = Math.floor(v.length / 2);
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
};
const of = (path) => median(runs.map((r) => path.reduce((o, k) => (o == null ? o : o[k]), r)));
const ratio = (a, b, target) =>
  a == null || b == null
    ? null
    : { value: Math.round((a / b) * 100) / 100, target, met: target == null ? null : a / b >= target };
// For a cost, where less is better: met at or below the target.
const ratioAtMost = (a, b, target) =>
  a == null || b == null ? null : { value: Math.round((a / b) * 100) / 100, at_most: target, met: a / b <= target };
const round = (x) => (x == null ? null : Math.round(x));

const pgbench = {
  enqueue_tps: round(of(["pgbench", "enqueue_tps"])),
  one_statement_tps: round(of(["pgbench", "one_statement_tps"])),
  enqueue_without_notify_tps: round(of(["pgbench", "enqueue_without_notify_tps"])),
};
const gw = runs[0].graphile_worker;
const graphile = gw && {
  version: gw.graphile_worker_version,
  options: {
    concurrentJobs: gw.concurrency,
    maxPoolSize: gw.concurrency + 1,
    localQueue: { size: gw.local_queue_size },
    completeJobBatchDelay: gw.complete_job_batch_delay_ms,
    failJobBatchDelay: gw.fail_job_batch_delay_ms,
    addJobs_chunk: gw.chunk,
    addJobs_in_flight: gw.add_parallel,
  },
  jobs: gw.jobs,
  add_per_second: round(of(["graphile_worker", "add_per_second"])),
  processed_per_second: round(of(["graphile_worker", "processed_per_second"])),
};
const http = runs[0].graphile_worker_http && {
  concurrentJobs: runs[0].graphile_worker_http.concurrency,
  jobs: runs[0].graphile_worker_http.jobs,
  processed_per_second: round(of(["graphile_worker_http", "processed_per_second"])),
  database_cpu_us_per_job: of(["graphile_worker_http", "database_cpu_us_per_job"]),
};
const herald = runs[0].herald && {
  notifications: runs[0].herald.notifications,
  concurrency: runs[0].herald.concurrency,
  single_per_second: round(of(["herald", "accepted_per_second", "single"])),
  batch_per_second: round(of(["herald", "accepted_per_second", "batch"])),
  delivered_per_second: round(of(["herald", "delivered_per_second"])),
  // Compared only where herald read the server's processes, as graphile.mjs does: its
  // stand-in for a server elsewhere is execution time, another figure.
  database_cpu_us_per_delivered: String(runs[0].herald.database_cpu_source).startsWith("every postgres process")
    ? of(["herald", "database_cpu_us_per_delivered"])
    : null,
};
const summary = {
  server: "PostgreSQL $server_version",
  runs: runs.length,
  statistic: runs.length > 1 ? "median" : "single run",
  clients: $clients,
  pgbench_seconds: $duration,
  pgbench,
  graphile_worker: graphile,
  graphile_worker_http: http,
  herald,
  ratios: herald && {
    single_enqueue_vs_pgbench_enqueue: ratio(herald.single_per_second, pgbench.enqueue_tps, 1.0),
    batch_enqueue_vs_graphile_addjobs: graphile && ratio(herald.batch_per_second, graphile.add_per_second, 0.5),
    delivered_vs_graphile_http: http && ratio(herald.delivered_per_second, http.processed_per_second, 1.0),
    delivered_vs_graphile_noop: graphile && ratio(herald.delivered_per_second, graphile.processed_per_second, null),
    database_cpu_per_delivery_vs_graphile_http: http && ratioAtMost(herald.database_cpu_us_per_delivered, http.database_cpu_us_per_job, 3.0),
  },
  per_run: runs,
};
process.stdout.write(JSON.stringify(summary, null, 2) + "\n");
EOF
