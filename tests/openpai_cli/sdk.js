// OpenPAI's JS SDK (@microsoft/openpai-js-sdk) driven as a script would drive it, against the
// cluster that OpenPAI's own CLI stored with `pai addc` (~/.openpai/clusters.json), unchanged.
// Usage: node sdk.js <alias> <action>[:arg[:arg...]]...; runs the actions in order, in one
// process, and prints {action: result} as JSON.
'use strict';

const fs = require('fs');
const os = require('os');
const path = require('path');
const { PAIV2 } = require('@microsoft/openpai-js-sdk');

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const FINAL = ['SUCCEEDED', 'FAILED', 'STOPPED'];

function client(alias) {
  const file = path.join(os.homedir(), '.openpai', 'clusters.json');
  const entry = JSON.parse(fs.readFileSync(file, 'utf8')).find((c) => c.cluster.alias === alias);
  if (!entry) throw new Error(`no cluster ${alias} in ${file}`);
  return new PAIV2.OpenPAIClient(entry.cluster);
}

async function waitFor(pai, user, job, states, seconds) {
  const deadline = Date.now() + seconds * 1000;
  const seen = [];
  for (;;) {
    const detail = await pai.job.getJob(user, job);
    const state = detail.jobStatus.state;
    if (seen[seen.length - 1] !== state) seen.push(state);
    if (states.includes(state)) return { detail, seen };
    if (Date.now() > deadline) throw new Error(`${job} is still ${state} after ${seconds}s`);
    await sleep(300);
  }
}

const actions = {
  // The VCs the user sees, and each one's SKU types.
  async vcs(pai) {
    const vcs = await pai.virtualCluster.listVirtualClusters();
    const skuTypes = {};
    for (const name of Object.keys(vcs)) skuTypes[name] = await pai.virtualCluster.getVirtualClusterSkuTypes(name);
    return { vcs, skuTypes };
  },
  // Poll the job until it ends; the states it went through on the way.
  async follow(pai, job, seconds) {
    return waitFor(pai, pai.config.username(), job, FINAL, Number(seconds || 60));
  },
  async waitRunning(pai, job, seconds) {
    return waitFor(pai, pai.config.username(), job, ['RUNNING', ...FINAL], Number(seconds || 60));
  },
  // The log locations of the first task's current attempt, and the text each location serves.
  async logs(pai, job) {
    const user = pai.config.username();
    const detail = await pai.job.getJob(user, job);
    const role = Object.keys(detail.taskRoles)[0];
    const task = detail.taskRoles[role].taskStatuses[0];
    const attempt = detail.jobStatus.attemptId;
    const locations = await pai.job.getTaskLogs(user, job, attempt, role, task.taskIndex, task.attemptId);
    const texts = {};
    for (const location of locations.locations) {
      const response = await fetch(location.uri, { headers: { Authorization: `Bearer ${pai.cluster.token}` } });
      texts[location.name] = await response.text();
    }
    const attempts = await pai.job.getTask(user, job, attempt, role, task.taskIndex);
    return { locations, texts, attempts };
  },
  async stop(pai, job) {
    const user = pai.config.username();
    const answer = await pai.job.updateJobExecutionType(user, job, 'STOP');
    return { answer, ...(await waitFor(pai, user, job, FINAL, 60)) };
  },
  async tag(pai, job, tag) {
    const user = pai.config.username();
    const added = await pai.job.addTag(user, job, tag);
    const tagged = (await pai.job.getJob(user, job)).tags;
    const listed = (await pai.job.listJobs({ username: user })).find((j) => j.name === job).tags;
    const removed = await pai.job.deleteTag(user, job, tag);
    const after = (await pai.job.getJob(user, job)).tags;
    return { added, tagged, listed, removed, after };
  },
  // Everything else a client reads about one job.
  async details(pai, job) {
    const user = pai.config.username();
    return {
      detail: await pai.job.getJob(user, job),
      firstAttempt: await pai.job.getJob(user, job, 0),
      config: await pai.job.getJobConfig(user, job),
      events: await pai.job.listEvents(user, job),
      attempts: await pai.jobHistory.getJobAttempts(user, job),
      healthz: await pai.jobHistory.getJobAttemptsHealthz(user, job),
    };
  },
};

(async () => {
  const [alias, ...steps] = process.argv.slice(2);
  const pai = client(alias);
  const results = {};
  for (const step of steps) {
    const [action, ...args] = step.split(':');
    results[action] = await actions[action](pai, ...args);
  }
  process.stdout.write(JSON.stringify(results));
})().catch((error) => {
  process.stderr.write(`${error.stack || error}\n${JSON.stringify(error.response ? error.response.data : error)}\n`);
  process.exit(1);
});
