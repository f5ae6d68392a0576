/* dashboard.test.js - the dashboard in a real browser (Debian's chromium,
 * headless, driven by puppeteer-core), against a running `crater up` that
 * tests/integration/test_dashboard.sh started and filled with jobs.
 *
 * Every number or text checked on a page is compared with what the API
 * answers for the same token at the same time: allocated GPUs and CPU,
 * pending and running counts, a pending job's reason, a job's state,
 * attempts, preemptions, node and cost, its log after a click from the
 * job page, the services and cost tables. It also checks the login (a
 * bad token is refused; the token stays out of every URL) and that the
 * page logs no error (a CSP violation is one); the shell script checks
 * the security headers with curl.
 * Waits are for selectors and states, never fixed sleeps. Screenshots go
 * to $ARTIFACTS. Exit status: 0 when every check passed.
 */
'use strict';

const fs = require('fs');
const path = require('path');
const puppeteer = require('puppeteer-core');

const env = process.env;
const BASE = env.DASH_URL;
const ART = env.ARTIFACTS;
const TIMEOUT = 20000;
let pass = 0, fail = 0;

function check(ok, what, detail) {
    if (ok) {
        pass++;
        return;
    }
    fail++;
    console.log('FAIL: ' + what + (detail !== undefined ? ': ' + JSON.stringify(detail) : ''));
}

async function apiRaw(p, token) {
    return fetch(BASE + p, {headers: {Authorization: 'Bearer ' + (token || env.TOKEN)}});
}

async function api(p, token) {
    return (await apiRaw(p, token)).json();
}

async function show(page, hash, name) {
    await page.evaluate((h) => { location.hash = h; }, hash);
    await page.waitForFunction((h, n) => {
        const m = document.getElementById('main');
        return m.dataset.loaded === n && m.dataset.hash === h;
    }, {timeout: TIMEOUT}, hash, name).catch(async (e) => {
        const m = await page.$eval('#main', (x) => [x.dataset.loaded, x.dataset.hash, x.textContent.slice(0, 300)]);
        throw new Error('view ' + hash + ' not drawn: ' + JSON.stringify(m) + ': ' + e.message);
    });
}

async function shot(page, name) {
    await page.screenshot({path: path.join(ART, name), fullPage: true});
}

/* data-k values on the page: {key: {v, text}} for the first of each. */
async function values(page) {
    return page.evaluate(() => {
        const out = {};
        for (const e of document.querySelectorAll('#main [data-k]'))
            if (!(e.dataset.k in out))
                out[e.dataset.k] = {v: e.dataset.v, text: e.textContent};
        return out;
    });
}

const sum = (xs, f) => xs.reduce((s, x) => s + f(x), 0);

async function login(page, token) {
    await page.waitForSelector('#login:not([hidden]) #token', {timeout: TIMEOUT});
    await page.type('#token', token);
    await page.click('#login button[type=submit]');
}

async function checkLogin(page) {
    await page.goto(BASE + '/', {waitUntil: 'domcontentloaded'});
    await login(page, 'crt_not_a_token');
    await page.waitForFunction(() => document.getElementById('login-error').textContent !== '',
        {timeout: TIMEOUT});
    check(await page.$eval('#login', (e) => !e.hidden), 'a bad token is refused');
    await login(page, env.TOKEN);
    await page.waitForSelector('#main[data-loaded=overview]', {timeout: TIMEOUT});
    const stored = await page.evaluate(() => sessionStorage.getItem('crater.token'));
    check(stored === env.TOKEN, 'token kept in sessionStorage');
    check(!page.url().includes(env.TOKEN), 'no token in the URL', page.url());
}

async function checkOverview(page) {
    await show(page, '#/overview', 'overview');
    const v = await values(page);
    const nodes = (await api('/api/v1/nodes')).items;
    const pending = (await api('/api/v1/jobs?state=pending')).items;
    const running = (await api('/api/v1/jobs?state=running')).items;
    const gpus = sum(nodes, (n) => n.allocated.gpus);
    check(Number(v['alloc-gpus'].v) === gpus && v['alloc-gpus'].text === String(gpus),
        'allocated GPUs = API', [v['alloc-gpus'], gpus]);
    check(Number(v['cap-gpus'].v) === sum(nodes, (n) => n.capacity.gpus), 'GPU capacity = API');
    check(Number(v['alloc-cpu_millis'].v) === sum(nodes, (n) => n.allocated.cpu_millis),
        'allocated CPU = API', v['alloc-cpu_millis']);
    check(Number(v['alloc-memory_bytes'].v) === sum(nodes, (n) => n.allocated.memory_bytes),
        'allocated memory = API');
    check(Number(v['pending-count'].v) === pending.length && pending.length === 1,
        'pending count = API', [v['pending-count'], pending.length]);
    check(Number(v['running-count'].v) === running.length, 'running count = API');
    check(Number(v['nodes'].v) === nodes.length, 'node count = API');
    await shot(page, 'dashboard-overview.png');
}

async function checkGpus(page) {
    await show(page, '#/gpus', 'gpus');
    const cells = await page.$$eval('[data-k=gpu-cell]', (es) => es.map((e) => ({
        node: e.dataset.node, index: Number(e.dataset.index), tasks: Number(e.dataset.tasks),
        jobs: [...e.querySelectorAll('a[data-job]')].map((a) => a.dataset.job)})));
    const res = (await api('/api/v1/resources?filter=type:gpu')).items;
    check(cells.length === res.length && res.length > 0, 'one heat-map cell per GPU', cells.length);
    const run = await api('/api/v1/jobs/' + env.JOB_RUN);
    const g = run.placement.gpus[0];
    const cell = cells.find((c) => c.node === run.placement.node && c.index === g.index);
    const r = res.find((x) => x.node === run.placement.node && x.index === g.index);
    check(cell && r && cell.tasks === r.tasks && cell.jobs.includes(env.JOB_RUN),
        'the running GPU job is a slice of its GPU', [cell, r && r.tasks]);
    await shot(page, 'dashboard-gpus.png');
}

async function checkQueue(page, token) {
    await show(page, '#/queue', 'queue');
    const v = await values(page);
    const pending = (await api('/api/v1/jobs?state=pending', token)).items;
    check(Number(v['pending-count'].v) === pending.length, 'queue: pending = API');
    const job = await api('/api/v1/jobs/' + env.JOB_WAIT, token);
    const reason = await page.$eval(`#pending tr[data-job="${env.JOB_WAIT}"] [data-k=reason]`,
        (e) => e.textContent).catch(() => null);
    check(reason === job.reason && reason.length > 0, 'pending reason = API', [reason, job.reason]);
}

async function checkJob(page) {
    await show(page, '#/job/' + env.JOB_LOW, 'job');
    const v = await values(page);
    const job = await api('/api/v1/jobs/' + env.JOB_LOW);
    check(v['job-state'].text === job.state, 'job state = API', [v['job-state'], job.state]);
    check(Number(v['job-attempts'].v) === job.attempts && job.attempts === 2, 'attempts = API');
    const pre = job.history.filter((e) => e.state === 'preempted').length;
    check(Number(v['job-preemptions'].v) === pre && pre >= 1, 'preemptions = API', pre);
    check(v['job-node'].text === job.placement.node, 'placement node = API');
    const segs = await page.$$eval('#timeline .seg', (es) => es.map((e) => e.dataset.state));
    check(JSON.stringify(segs) === JSON.stringify(job.history.map((e) => e.state)),
        'timeline = history', segs);
    await shot(page, 'dashboard-job.png');
}

async function checkLogs(page) {
    await show(page, '#/job/' + env.JOB_HIGH, 'job');
    const v = await values(page);
    const job = await api('/api/v1/jobs/' + env.JOB_HIGH);
    check(v['job-state'].text === 'succeeded' && job.state === 'succeeded', 'finished job state');
    const cost = job.cost || (await api('/api/v1/jobs/' + env.JOB_HIGH + '/metrics')).cost;
    check(cost && Number(v['job-cost'].v) === cost.total_micros && cost.total_micros > 0,
        'job cost = API', [v['job-cost'], cost]);
    await page.click('a[data-log="1/stdout"]');
    await page.waitForSelector('#main[data-loaded=logs]', {timeout: TIMEOUT});
    const text = await page.$eval('[data-k=log-text]', (e) => e.textContent);
    const want = await (await apiRaw('/api/v1/jobs/' + env.JOB_HIGH + '/logs?attempt=1')).text();
    check(text === want && want.includes('high ran'), 'log after a click = API', [text, want]);
    await shot(page, 'dashboard-logs.png');
}

async function checkServices(page) {
    await show(page, '#/services', 'services');
    const v = await values(page);
    const s = await api('/api/v1/services');
    check(Number(v['services-count'].v) === s.items.length, 'services = API');
}

async function checkCost(page) {
    await show(page, '#/cost?by=job&window=24h', 'cost');
    const c = await api('/api/v1/cost?window=24h&aggregate=job');
    const want = sum(c.items.filter((x) => x.name === env.JOB_HIGH), (x) => x.totalCostMicros);
    const got = await page.$eval(`#cost tr[data-name="${env.JOB_HIGH}"] [data-k=cost-item]`,
        (e) => Number(e.dataset.v)).catch(() => null);
    check(got === want && want > 0, 'a finished job\'s cost row = API', [got, want]);
    await show(page, '#/cost?by=tenant&window=24h', 'cost');
    await page.click('#cost tr[data-name=default] a');
    await page.waitForFunction(() => /tenant=default/.test(document.getElementById('main').dataset.hash) &&
        document.getElementById('main').dataset.loaded === 'cost', {timeout: TIMEOUT});
    const rows = await page.$$eval('#cost tbody tr', (es) => es.map((e) => e.dataset.name));
    check(rows.includes(env.JOB_HIGH) && !rows.includes('__idle__'), 'tenant drill-down lists its jobs', rows);
    await shot(page, 'dashboard-cost.png');
}

async function checkUserToken(page) {
    await page.click('#logout');
    await page.waitForSelector('#login:not([hidden])', {timeout: TIMEOUT});
    check(await page.evaluate(() => sessionStorage.getItem('crater.token')) === null, 'log out forgets the token');
    await login(page, env.USER_TOKEN);
    await page.waitForSelector('#main[data-loaded]:not([data-loaded=""])', {timeout: TIMEOUT});
    await checkQueue(page, env.USER_TOKEN);
}

async function main() {
    fs.mkdirSync(ART, {recursive: true});
    const browser = await puppeteer.launch({executablePath: env.CHROMIUM, headless: true,
        args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run']});
    const errors = [], urls = [];
    try {
        const page = await browser.newPage();
        await page.setViewport({width: 1280, height: 800});
        page.on('console', (m) => m.type() === 'error' && !/401|Unauthorized/.test(m.text()) && errors.push(m.text()));
        page.on('pageerror', (e) => errors.push(String(e)));
        page.on('request', (r) => urls.push(r.url()));
        page.on('response', (r) => r.status() >= 400 && r.status() !== 401 &&
            errors.push(r.status() + ' ' + r.url()));
        await checkLogin(page);
        for (const f of [checkOverview, checkGpus, checkQueue, checkJob, checkLogs, checkServices, checkCost, checkUserToken])
            await f(page);
        check(errors.length === 0, 'no error in the page (CSP violations are errors)', errors);
        check(!urls.some((u) => u.includes(env.TOKEN) || u.includes(env.USER_TOKEN)), 'no token in a request URL');
    } finally {
        await browser.close();
    }
}

main().catch((e) => {
    fail++;
    console.log('FAIL: ' + (e.stack || e));
}).finally(() => {
    console.log(`dashboard.test.js: ${pass} passed, ${fail} failed`);
    process.exitCode = fail ? 1 : 0;
});
