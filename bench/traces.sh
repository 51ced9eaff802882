#!/usr/bin/env bash
# What traces cost: `herald bench` and `herald bench --traces` (every child exporting its spans
# over OTLP/HTTP to a receiver in the bench that counts them and keeps nothing), alternated
# --runs times, each run on a new scratch database. The summary has each figure's median with
# and without traces, and with ÷ without for delivered/s against the target (≥ 0.95: traces
# cost at most 5 % of delivered/s), for the drain's CPU time per delivered notification (which
# shows a cost smaller than delivered/s's spread between runs), single enqueue/s, and the
# spans exported per notification.
#
# Usage:
#   cargo build --release
#   bench/traces.sh [--runs 3] [--backend sqlite|postgres] [-- <herald bench args>]
#   bench/traces.sh --runs 1 -- --notifications 2000 --latency-seconds 3    # a smoke run
#   bench/traces.sh --help
#
# Needs: bash, node (for the summary), and for PostgreSQL psql and a server that lets --server's
# role create databases. Progress goes to stderr, a JSON summary to stdout. Scratch databases
# (herald_traces_<pid>_…) and the scratch folder are removed on exit, whatever the outcome.

set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")

server=${HERALD_BENCH_SERVER:-postgres://postgres@127.0.0.1:5432}
runs=3
backend=sqlite
herald_bin=$repo/target/release/herald
bench_args=()

usage() {
    cat <<EOF
Usage: bench/traces.sh [options] [-- herald bench options]

  --runs N             pairs of runs, without and with traces, alternated (default $runs)
  --backend B          sqlite or postgres (default $backend)
  --server URL         PostgreSQL server, without a database name
                       (default: \$HERALD_BENCH_SERVER or $server)
  --herald-bin PATH    the herald binary (default target/release/herald)

Everything after -- goes to every herald bench run (e.g. --notifications 5000).
EOF
}

while (($#)); do
    case $1 in
        --runs) runs=$2; shift 2 ;;
        --backend) backend=$2; shift 2 ;;
        --server) server=${2%/}; shift 2 ;;
        --herald-bin) herald_bin=$2; shift 2 ;;
        --) shift; bench_args=("$@"); break ;;
        -h | --help) usage; exit 0 ;;
        *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
    esac
done

[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "--runs must be a whole number ≥ 1" >&2; exit 2; }
case $backend in
    sqlite) need=(node) ;;
    postgres) need=(node psql) ;;
    *) echo "--backend must be sqlite or postgres" >&2; exit 2 ;;
esac

say() { echo "traces: $*" >&2; }

me=traces
source "$here/scratch.sh"
require_tools "${need[@]}"
require_herald "$herald_bin"

# A new empty database named $1; its URL goes to $url.
new_database() {
    case $backend in
        postgres)
            local db="herald_traces_$$_$1"
            databases+=("$db")
            admin -c "CREATE DATABASE \"$db\"" >/dev/null
            url=$server/$db
            ;;
        sqlite)
            mkdir -p "$scratch/$1"
            url=sqlite://$scratch/$1/herald.db
            ;;
    esac
}

results=$scratch/results.jsonl
for ((run = 1; run <= runs; run++)); do
    for traces in false true; do
        new_database "run${run}_$traces"
        flag=()
        [[ $traces == true ]] && flag=(--traces)
        say "run $run of $runs, traces $traces: herald bench ${flag[*]} ${bench_args[*]}"
        # The children inherit the environment: no exporter but the bench's own.
        out=$(env -u OTEL_EXPORTER_OTLP_ENDPOINT -u OTEL_EXPORTER_OTLP_TRACES_ENDPOINT \
            "$herald_bin" bench --database-url "$url" ${flag[@]+"${flag[@]}"} \
            ${bench_args[@]+"${bench_args[@]}"} | tr -d '\n')
        printf '{"traces":%s,"bench":%s}\n' "$traces" "$out" >>"$results"
    done
done

node - "$results" "$backend" <<'EOF'
const fs = require("node:fs");
const runs = fs.readFileSync(process.argv[2], "utf8").trim().split("\n").map(JSON.parse);
const target = 0.95;
const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};
const figures = (b) => ({
  single_per_second: b.accepted_per_second.single,
  batch_per_second: b.accepted_per_second.batch,
  delivered_per_second: b.delivered_per_second,
  cpu_us_per_delivered: b.cpu_us_per_delivered,
  latency_p50_ms: b.latency_accept_to_delivered_ms.p50,
  latency_p99_ms: b.latency_accept_to_delivered_ms.p99,
  rss_peak_mib: b.rss_mib.peak,
});
const side = (traces) => {
  const each = runs.filter((r) => r.traces === traces).map((r) => figures(r.bench));
  const medians = {};
  for (const name of Object.keys(each[0])) medians[name] = median(each.map((f) => f[name]));
  return { medians, runs: each };
};
const without = side(false);
const withTraces = side(true);
const ratio = (name) => Math.round((withTraces.medians[name] / without.medians[name]) * 100) / 100;
const spans = runs.filter((r) => r.traces).map((r) => r.bench.traces.spans_per_notification);
process.stdout.write(JSON.stringify({
  backend: process.argv[3],
  runs: runs.length / 2,
  statistic: runs.length > 2 ? "median" : "single run",
  without_traces: without,
  with_traces: withTraces,
  spans_per_notification: median(spans),
  ratios: {
    delivered: { value: ratio("delivered_per_second"), target, met: ratio("delivered_per_second") >= target },
    cpu_per_delivered: ratio("cpu_us_per_delivered"),
    single: ratio("single_per_second"),
    batch: ratio("batch_per_second"),
  },
}, null, 2) + "\n");
EOF
