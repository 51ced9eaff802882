// graphile-worker as a reference queue for bench/reference.sh: adds N jobs with WorkerUtils.addJobs
// (chunks of --chunk, --add-parallel chunks in flight at once), then starts one worker process
// with the throughput settings graphile-worker's performance page uses (a local queue, batched
// completion) and times the drain of those jobs by a task that does nothing (--task noop) or that
// does the network work of one of herald's deliveries (--task http): one POST of the message to
// the sandbox vendor at --target (a `herald sandbox`), as herald's sandbox adapter sends it, the
// job failing unless the vendor answers 2xx.
//
// It prints one JSON object on stdout; progress goes to stderr. bench/reference.sh runs it; by
// hand:
//
//   node bench/graphile.mjs --module-dir DIR --database-url postgres://…/scratch [--jobs 20000] \
//     [--task http --target http://127.0.0.1:PORT]
//
// where DIR is a folder with graphile-worker installed (npm install graphile-worker@0.17.3).
// The database must exist; the worker creates its own schema in it.

import { EventEmitter } from "node:events";
import { readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { performance } from "node:perf_hooks";

// Without this, graphile-worker formats a log line for every finished job (its own
// performance tests turn it off the same way). Read when the module loads, so set it first.
process.env.NO_LOG_SUCCESS = "1";

const options = parseArgs(process.argv.slice(2), {
  "module-dir": null,
  "database-url": null,
  jobs: "20000",
  chunk: "1000",
  "add-parallel": "4",
  concurrency: "24",
  "local-queue": "500",
  "batch-delay": "0",
  task: "noop",
  target: null,
});
for (const required of ["module-dir", "database-url"]) {
  if (!options[required]) fail(`--${required} is required`);
}
const jobs = positive("jobs");
const chunk = positive("chunk");
const addParallel = positive("add-parallel");
const concurrency = positive("concurrency");
const localQueue = Number(options["local-queue"]);
const task = options.task;
if (!["noop", "http"].includes(task)) fail("--task must be noop or http");
if (task === "http" && !options.target) fail("--task http needs --target");
const messagesUrl = task === "http" ? new URL("/messages", options.target).href : null;
const batchDelay = Number(options["batch-delay"]);

const load = createRequire(join(options["module-dir"], "package.json"));
const worker = load("graphile-worker");
const version = load("graphile-worker/package.json").version;
const connectionString = options["database-url"];

// Warnings and errors only, on stderr: stdout carries nothing but the summary.
const logger = new worker.Logger(() => (level, message) => {
  if (level === "error" || level === "warning") {
    process.stderr.write(`graphile-worker ${level}: ${message}\n`);
  }
});

const summary = {
  graphile_worker_version: version,
  task,
  jobs,
  chunk,
  add_parallel: addParallel,
  concurrency,
  local_queue_size: localQueue,
  complete_job_batch_delay_ms: batchDelay,
  fail_job_batch_delay_ms: batchDelay,
};

const utils = await worker.makeWorkerUtils({
  connectionString,
  maxPoolSize: addParallel + 1,
  logger,
});
try {
  await utils.migrate();
  Object.assign(summary, await addAll(utils));
  Object.assign(summary, await drain(utils));
} finally {
  await utils.release();
}
process.stdout.write(JSON.stringify(summary) + "\n");

/** Adds every job, `addParallel` chunks at a time; answers the rate. */
async function addAll(utils) {
  // The specs are made before the clock starts: what is timed is the queue taking them. Each
  // payload is about the size of one of herald's bench notifications.
  // Each run's references are its own: a sandbox kept across runs may replay a key it has seen.
  const run = Date.now().toString(36);
  const chunks = [];
  for (let first = 0; first < jobs; first += chunk) {
    const specs = [];
    for (let i = first; i < Math.min(first + chunk, jobs); i++) {
      specs.push({
        identifier: task,
        payload: {
          reference: `job-${run}-${i}`,
          channel: "email",
          to: `job-${i}@bench.example`,
          subject: "Your export is ready",
          text: "Download it within seven days.",
        },
      });
    }
    chunks.push(specs);
  }
  let next = 0;
  let added = 0;
  const ticker = progress("addJobs", () => added);
  const started = performance.now();
  await Promise.all(
    Array.from({ length: addParallel }, async () => {
      while (next < chunks.length) {
        const specs = chunks[next++];
        await utils.addJobs(specs);
        added += specs.length;
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  clearInterval(ticker);
  const stored = await remaining(utils);
  if (stored !== jobs) fail(`addJobs stored ${stored} jobs, expected ${jobs}`);
  process.stderr.write(`addJobs: ${jobs} in ${seconds.toFixed(2)} s (${Math.round(jobs / seconds)}/s)\n`);
  return { add_seconds: round(seconds), add_per_second: Math.round(jobs / seconds) };
}

/**
 * Starts a worker on the backlog and waits until every job has run and its completion has been
 * committed (the jobs table is empty). The rate counts from the first job's start to that
 * moment, so the worker's own start-up is not in it; `drain_wall_seconds` includes it.
 */
async function drain(utils) {
  const events = new EventEmitter();
  let firstStart = null;
  let succeeded = 0;
  let failure = null;
  let allRan;
  const ran = new Promise((resolve) => (allRan = resolve));
  let databaseCpuAtStart = null;
  events.on("job:start", () => {
    if (firstStart == null) {
      firstStart = performance.now();
      databaseCpuAtStart = postgresCpuSeconds();
    }
  });
  events.on("job:success", () => {
    if (++succeeded === jobs) allRan();
  });
  events.on("job:error", ({ error }) => {
    failure ??= error;
    allRan();
  });

  const ticker = progress("drain", () => succeeded);
  const launched = performance.now();
  const runner = await worker.run({
    noHandleSignals: true,
    events,
    logger,
    taskList: {
      noop: async () => {},
      // Node's fetch keeps connections alive and reuses them, as herald's client does.
      http: async (payload) => {
        const answer = await fetch(messagesUrl, {
          method: "POST",
          headers: { "content-type": "application/json", "idempotency-key": payload.reference },
          body: JSON.stringify(payload),
        });
        await answer.arrayBuffer();
        if (!answer.ok) throw new Error(`the sandbox answered ${answer.status}`);
      },
    },
    preset: {
      worker: {
        connectionString,
        concurrentJobs: concurrency,
        // The docs' advice: concurrency + 1 connections at least (jobs do not use the pool).
        maxPoolSize: concurrency + 1,
        localQueue: { size: localQueue },
        completeJobBatchDelay: batchDelay,
        failJobBatchDelay: batchDelay,
      },
    },
  });
  runner.promise.catch((error) => {
    failure ??= error;
    allRan();
  });
  await ran;
  if (failure) {
    clearInterval(ticker);
    await runner.stop();
    fail(`a job failed: ${failure}`);
  }
  // Completions may still sit in the batch: done is when the table says so.
  const ranAt = performance.now();
  while ((await remaining(utils)) > 0) {
    if (performance.now() - ranAt > 60_000) {
      clearInterval(ticker);
      await runner.stop();
      fail("every job ran, but their completions were not committed within 60 s");
    }
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  const finished = performance.now();
  const databaseCpu = postgresCpuSeconds();
  clearInterval(ticker);
  await runner.stop();
  const seconds = (finished - firstStart) / 1000;
  process.stderr.write(`drain: ${jobs} in ${seconds.toFixed(2)} s (${Math.round(jobs / seconds)}/s)\n`);
  return {
    process_seconds: round(seconds),
    processed_per_second: Math.round(jobs / seconds),
    drain_wall_seconds: round((finished - launched) / 1000),
    // The server's CPU per job over the same window as the rate, as herald bench reads its own.
    database_cpu_us_per_job:
      databaseCpu == null || databaseCpuAtStart == null
        ? null
        : Math.round(((databaseCpu - databaseCpuAtStart) * 1e7) / jobs) / 10,
  };
}

/**
 * The CPU time of every `postgres` process on this machine so far (user and system, and what
 * the server reaped of ended backends), in seconds; null where none runs here. It is the
 * server's only where the server runs on this machine (bench/reference.sh compares it only
 * then). /proc/PID/stat's 14th to 17th fields, in USER_HZ ticks (100 a second).
 */
function postgresCpuSeconds() {
  let ticks = 0;
  let found = false;
  for (const pid of readdirSync("/proc").filter((name) => /^\d+$/.test(name))) {
    let stat;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    } catch {
      continue; // it ended meanwhile
    }
    const command = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
    if (command !== "postgres") continue;
    const fields = stat.slice(stat.lastIndexOf(")") + 1).trim().split(/\s+/);
    ticks += [11, 12, 13, 14].reduce((sum, i) => sum + Number(fields[i]), 0);
    found = true;
  }
  return found ? ticks / 100 : null;
}

async function remaining(utils) {
  const { rows } = await utils.withPgClient((client) =>
    client.query("SELECT count(*)::int AS n FROM graphile_worker._private_jobs"),
  );
  return rows[0].n;
}

function progress(phase, done) {
  const started = performance.now();
  return setInterval(() => {
    const n = done();
    const rate = n / ((performance.now() - started) / 1000);
    process.stderr.write(`${phase}: ${n}/${jobs} (${Math.round(rate)}/s)\n`);
  }, 1000);
}

function parseArgs(argv, defaults) {
  const parsed = { ...defaults };
  for (let i = 0; i < argv.length; i++) {
    const name = argv[i].replace(/^--/, "");
    if (!argv[i].startsWith("--") || !(name in defaults) || i + 1 >= argv.length) {
      fail(`unknown or incomplete argument: ${argv[i]}`);
    }
    parsed[name] = argv[++i];
  }
  return parsed;
}

function positive(name) {
  const value = Number(options[name]);
  if (!Number.isInteger(value) || value < 1) fail(`--${name} must be a whole number ≥ 1`);
  return value;
}

function round(seconds) {
  return Math.round(seconds * 1000) / 1000;
}

function fail(message) {
  process.stderr.write(`graphile.mjs: ${message}\n`);
  process.exit(1);
}
