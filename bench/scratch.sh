# Sourced by bench/reference.sh and bench/growth.sh: the tools they need, and the scratch folder
# and scratch databases they make, which the exit trap removes whatever the outcome. The caller
# sets `me` (its name, for messages and scratch names) and `server` (PostgreSQL, without a
# database name) first.

# Exits unless every named tool is on PATH.
require_tools() {
    for tool in "$@"; do
        command -v "$tool" >/dev/null || { echo "$me: $tool is not on PATH" >&2; exit 1; }
    done
}

# Exits unless $1 is a herald binary.
require_herald() {
    [[ -x $1 ]] || { echo "$me: no herald binary at $1 (cargo build --release first)" >&2; exit 1; }
}

# Runs psql on the server's maintenance database.
admin() { psql "$server/postgres" -qAtX -v ON_ERROR_STOP=1 "$@"; }

# Everything this script creates, so that the trap removes exactly that. Callers add each
# database they create to `databases` (in the main shell: a subshell's list would not reach
# the trap).
scratch_parent=${HERALD_BENCH_SCRATCH:-${TMPDIR:-/tmp}}
mkdir -p "$scratch_parent"
scratch=$(mktemp -d "$scratch_parent/herald-$me.XXXXXX")
databases=()
# Processes it starts (a vendor), stopped on exit.
children=()

cleanup() {
    local status=$?
    trap - EXIT INT TERM
    for pid in ${children[@]+"${children[@]}"}; do
        kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    done
    for db in ${databases[@]+"${databases[@]}"}; do
        admin -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" >/dev/null 2>&1 ||
            echo "$me: could not drop database $db" >&2
    done
    rm -rf "$scratch"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
