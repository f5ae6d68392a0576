/* app.js - the Crater dashboard (doc/dashboard.md).
 *
 * One page, many views, chosen by the URL's fragment (#/overview,
 * #/gpus, #/queue, #/job/17, #/job/17/logs?attempt=2, #/services,
 * #/cost?by=tenant). Every view is drawn from the REST API with the token
 * the person typed, sent as "Authorization: Bearer" and kept in this
 * tab's sessionStorage: never in a URL, a cookie or localStorage. The
 * dashboard only reads; what a token may not see the API refuses, and the
 * view says so.
 *
 * Text from the API only ever reaches the page through textContent (el()
 * below), never as HTML, and the page runs under a Content-Security-Policy
 * that allows no inline script. Numbers keep their raw API value in a
 * data-v attribute beside the text a person reads, so the browser test
 * (tests/browser/dashboard.test.js) compares the page with the API
 * exactly. main[data-loaded] names the view once it is drawn and
 * main[data-hash] the fragment it was drawn for.
 */
'use strict';

(function () {
    const TOKEN_KEY = 'crater.token';
    const REFRESH_MS = 15000;
    let renderSeq = 0;

    /* ---- DOM helpers ------------------------------------------------ */

    function el(tag, attrs, ...kids) {
        const e = document.createElement(tag);
        for (const [k, v] of Object.entries(attrs || {})) {
            if (v === undefined || v === null || v === false)
                continue;
            if (k === 'class')
                e.className = v;
            else if (k.startsWith('on'))
                e.addEventListener(k.slice(2), v);
            else
                e.setAttribute(k, v === true ? '' : String(v));
        }
        for (const c of kids.flat(Infinity))
            if (c !== null && c !== undefined && c !== false)
                e.append(c instanceof Node ? c : String(c));
        return e;
    }

    /* A number shown as text, its raw value in data-v, named by data-k. */
    function num(key, raw, text) {
        return el('span', {'data-k': key, 'data-v': raw}, text ?? String(raw));
    }

    function table(head, rows, attrs) {
        return el('table', attrs,
            el('thead', null, el('tr', null, head.map((h) => el('th', null, h)))),
            el('tbody', null, rows));
    }

    function bar(frac, cls) {
        const f = Math.max(0, Math.min(1, frac || 0));
        const fill = el('span', {class: 'fill ' + (cls || '')});
        fill.style.width = (f * 100).toFixed(1) + '%';
        return el('span', {class: 'bar'}, fill);
    }

    function jobLink(id) {
        return el('a', {href: '#/job/' + encodeURIComponent(id), 'data-job': id}, id);
    }

    /* ---- units ------------------------------------------------------ */

    const GiB = 1024 ** 3;
    const fmt = {
        gib: (b) => (b / GiB).toFixed(b % GiB ? 1 : 0) + ' GiB',
        cores: (m) => (m / 1000).toFixed(m % 1000 ? 1 : 0),
        pct: (f) => (100 * (f || 0)).toFixed(0) + '%',
        /* micro-units are exact: small amounts keep all six digits */
        money: (v, cur) => (v || 0).toFixed(v && Math.abs(v) < 0.01 ? 6 : 4) +
            (cur ? ' ' + cur : ''),
        time: (ms) => (ms ? new Date(ms).toLocaleString() : '-'),
        age: (ms) => {
            const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
            return s < 120 ? s + ' s' : s < 7200 ? Math.round(s / 60) + ' min'
                : Math.round(s / 3600) + ' h';
        },
    };

    function resSummary(r) {
        if (!r)
            return '-';
        const parts = [];
        if (r.gpus)
            parts.push(r.gpus + ' GPU' + (r.gpu_memory_bytes ? ' (' + fmt.gib(r.gpu_memory_bytes) + ')' : ''));
        parts.push(fmt.cores(r.cpu_millis || 0) + ' CPU');
        parts.push(fmt.gib(r.memory_bytes || 0));
        return parts.join(', ');
    }

    /* ---- the API ---------------------------------------------------- */

    class AuthError extends Error {}

    async function errorText(r) {
        try {
            const j = await r.json();
            return j.error || r.statusText;
        } catch (e) {
            return r.statusText;
        }
    }

    async function api(path, raw) {
        const token = sessionStorage.getItem(TOKEN_KEY) || '';
        const r = await fetch(path, {
            headers: {Authorization: 'Bearer ' + token},
            cache: 'no-store',
            credentials: 'omit',
        });
        if (r.status === 401)
            throw new AuthError(await errorText(r));
        if (!r.ok)
            throw new Error(path.split('?')[0] + ': ' + r.status + ' ' + await errorText(r));
        return raw ? r : r.json();
    }

    /* Every page of a list (at most 10,000 items). */
    async function listAll(path) {
        const sep = path.includes('?') ? '&' : '?';
        let items = [], after = null;
        for (let i = 0; i < 10; i++) {
            const page = await api(path + sep + 'limit=1000' +
                (after ? '&after=' + encodeURIComponent(after) : ''));
            items = items.concat(page.items || []);
            if (!(after = page.next))
                break;
        }
        return items;
    }

    /* ---- overview ----------------------------------------------------- */

    /* Cluster totals per resource: capacity, allocated and measured, in
     * the resource's own unit (measured ones are weighted by capacity). */
    function totals(nodes, resources) {
        const t = {};
        const add = (k, cap, alloc, meas) => {
            t[k] = t[k] || {cap: 0, alloc: 0, meas: 0};
            t[k].cap += cap;
            t[k].alloc += alloc;
            t[k].meas += meas;
        };
        const disk = {}, gmem = {};
        for (const r of resources) {
            if (r.type === 'disk')
                disk[r.node] = (disk[r.node] || 0) + r.capacity_bytes;
            if (r.type === 'gpu')
                gmem[r.node] = (gmem[r.node] || 0) + ((r.measured || {}).memory_used_bytes || 0);
        }
        for (const n of nodes) {
            const c = n.capacity, a = n.allocated, m = n.measured, u = n.utilization;
            add('gpus', c.gpus, a.gpus, m.gpu * c.gpus);
            add('gpu_memory_bytes', c.gpu_memory_bytes, a.gpu_memory_bytes, gmem[n.name] || 0);
            add('cpu_millis', c.cpu_millis, a.cpu_millis, m.cpu * c.cpu_millis);
            add('memory_bytes', c.memory_bytes, a.memory_bytes, m.memory * c.memory_bytes);
            const d = disk[n.name] || 0;
            add('disk_bytes', d, u.disk * d, m.disk * d);
        }
        return t;
    }

    const RESOURCES = [
        ['gpus', 'GPUs', String],
        ['gpu_memory_bytes', 'GPU memory', fmt.gib],
        ['cpu_millis', 'CPU (cores)', fmt.cores],
        ['memory_bytes', 'Memory', fmt.gib],
        ['disk_bytes', 'Disk', fmt.gib],
    ];

    function totalsTable(t) {
        const rows = RESOURCES.map(([k, label, f]) => {
            const x = t[k] || {cap: 0, alloc: 0, meas: 0};
            const fa = x.cap ? x.alloc / x.cap : 0, fm = x.cap ? x.meas / x.cap : 0;
            return el('tr', {'data-resource': k},
                el('th', null, label),
                el('td', null, num('alloc-' + k, Math.round(x.alloc), f(Math.round(x.alloc))),
                    ' of ', num('cap-' + k, x.cap, f(x.cap))),
                el('td', null, bar(fa, 'alloc'), ' ', num('allocpct-' + k, fa, fmt.pct(fa))),
                el('td', null, bar(fm, 'meas'), ' ', num('measpct-' + k, fm, fmt.pct(fm))));
        });
        return table(['resource', 'allocated', 'allocated %', 'measured %'], rows,
            {id: 'totals'});
    }

    function nodeRow(n) {
        const c = n.capacity, a = n.allocated, m = n.measured;
        return el('tr', {'data-node': n.name},
            el('th', null, n.name),
            el('td', {class: 'state-' + n.state}, n.state + (n.cordoned ? ', cordoned' : '')),
            el('td', null, num('node-gpus', a.gpus), ' / ' + c.gpus),
            el('td', null, fmt.gib(a.gpu_memory_bytes) + ' / ' + fmt.gib(c.gpu_memory_bytes)),
            el('td', null, fmt.cores(a.cpu_millis) + ' / ' + fmt.cores(c.cpu_millis)),
            el('td', null, fmt.gib(a.memory_bytes) + ' / ' + fmt.gib(c.memory_bytes)),
            el('td', null, fmt.pct(m.gpu) + ' / ' + fmt.pct(m.cpu) + ' / ' + fmt.pct(m.memory)),
            el('td', null, num('node-jobs', n.jobs.length)));
    }

    async function viewOverview() {
        const [nodes, res, pending, running] = await Promise.all([
            api('/api/v1/nodes'), api('/api/v1/resources'),
            listAll('/api/v1/jobs?state=pending'), listAll('/api/v1/jobs?state=running'),
        ]);
        const ready = nodes.items.filter((n) => n.state === 'Ready').length;
        return el('section', null,
            el('h1', null, 'Cluster overview'),
            el('p', {class: 'counts'},
                num('nodes-ready', ready), ' of ', num('nodes', nodes.items.length), ' nodes ready · ',
                el('a', {href: '#/queue'}, num('pending-count', pending.length), ' pending'), ' · ',
                num('running-count', running.length), ' running'),
            totalsTable(totals(nodes.items, res.items)),
            el('p', {class: 'note'}, 'Allocated: committed to jobs (the scheduler\'s view). ' +
                'Measured: the agents\' last samples.'),
            el('h2', null, 'Nodes'),
            table(['node', 'state', 'GPUs', 'GPU memory', 'CPU', 'memory',
                'measured GPU / CPU / mem', 'jobs'], nodes.items.map(nodeRow), {id: 'nodes'}));
    }

    /* ---- GPU heat map ------------------------------------------------- */

    function heat(u) {
        const f = Math.max(0, Math.min(1, u || 0));
        return 'hsl(' + Math.round(210 - 210 * f) + ', 70%, ' + Math.round(92 - 40 * f) + '%)';
    }

    /* Jobs by GPU: "node/index" -> [{id, bytes}]. */
    function slicesByGpu(jobs) {
        const s = {};
        for (const j of jobs) {
            const p = j.placement;
            for (const g of (p && p.gpus) || []) {
                const k = p.node + '/' + g.index;
                (s[k] = s[k] || []).push({id: j.id, bytes: g.memory_bytes});
            }
        }
        return s;
    }

    function gpuCell(g, slices) {
        const m = g.measured || {};
        const jobs = slices[g.node + '/' + g.index] || [];
        const cell = el('td', {class: 'cell', 'data-k': 'gpu-cell', 'data-node': g.node,
            'data-index': g.index, 'data-util': m.util || 0, 'data-tasks': g.tasks},
        el('div', {class: 'util'}, fmt.pct(m.util)),
        el('div', {class: 'small'}, g.model),
        el('div', {class: 'small'}, g.tasks + (g.tasks === 1 ? ' slice · ' : ' slices · ') +
            fmt.gib(g.allocated_bytes) + ' of ' + fmt.gib(g.memory_bytes)),
        bar(g.memory_bytes ? g.allocated_bytes / g.memory_bytes : 0, 'alloc'),
        el('div', {class: 'small'}, jobs.map((j) => [jobLink(j.id), ' '])));
        cell.style.backgroundColor = heat(m.util);
        cell.title = g.uuid + ': measured ' + fmt.pct(m.util) + ', memory used ' +
            fmt.gib(m.memory_used_bytes || 0);
        return cell;
    }

    async function viewGpus() {
        const [nodes, res, jobs] = await Promise.all([api('/api/v1/nodes'),
            api('/api/v1/resources?filter=type:gpu'),
            listAll('/api/v1/jobs?state=bound,running,preempting')]);
        const slices = slicesByGpu(jobs);
        const byNode = {};
        for (const g of res.items)
            (byNode[g.node] = byNode[g.node] || [])[g.index] = g;
        const width = Math.max(1, ...nodes.items.map((n) => n.capacity.gpus));
        const head = ['node'];
        for (let i = 0; i < width; i++)
            head.push('GPU ' + i);
        const rows = nodes.items.map((n) => el('tr', {'data-node': n.name},
            el('th', null, n.name, el('div', {class: 'small'}, n.state)),
            n.capacity.gpus ? (byNode[n.name] || []).map((g) => gpuCell(g, slices))
                : el('td', {class: 'none', colspan: width}, 'no GPUs')));
        return el('section', null,
            el('h1', null, 'GPUs: measured utilisation and slices'),
            el('p', {class: 'note'}, 'Colour: measured SM utilisation (the agents\' last ' +
                'sample). A slice is a job placed on the GPU; the bar is the GPU memory ' +
                'allocated to them.'),
            table(head, rows, {id: 'heatmap', class: 'heatmap'}));
    }

    /* ---- queue -------------------------------------------------------- */

    function pendingRow(j, i) {
        return el('tr', {'data-job': j.id},
            el('td', null, String(i + 1)), el('td', null, jobLink(j.id)),
            el('td', null, j.name), el('td', null, j.tenant),
            el('td', null, String(j.priority)), el('td', null, fmt.age(j.submitted_ms)),
            el('td', null, resSummary(j.resources)),
            el('td', {'data-k': 'reason', class: 'reason'}, j.reason || ''));
    }

    function activeRow(j) {
        const p = j.placement || {};
        return el('tr', {'data-job': j.id},
            el('td', null, jobLink(j.id)), el('td', null, j.name), el('td', null, j.tenant),
            el('td', {'data-k': 'state'}, j.state), el('td', null, p.node || '-'),
            el('td', null, (p.gpus || []).map((g) => g.index).join(',') || '-'),
            el('td', null, fmt.age(j.started_ms || j.submitted_ms)));
    }

    async function viewQueue() {
        const [pending, active] = await Promise.all([listAll('/api/v1/jobs?state=pending'),
            listAll('/api/v1/jobs?state=bound,running,preempting')]);
        return el('section', null,
            el('h1', null, 'Queue'),
            el('p', {class: 'counts'}, num('pending-count', pending.length), ' pending, ',
                num('active-count', active.length), ' placed'),
            el('h2', null, 'Pending, in queue order'),
            pending.length ? table(['#', 'job', 'name', 'tenant', 'priority', 'waiting',
                'asks', 'why it waits'], pending.map(pendingRow), {id: 'pending'})
                : el('p', null, 'No job is waiting.'),
            el('h2', null, 'Placed'),
            table(['job', 'name', 'tenant', 'state', 'node', 'GPUs', 'for'],
                active.map(activeRow), {id: 'active'}));
    }

    /* ---- a job -------------------------------------------------------- */

    function timeline(job) {
        const h = job.history || [];
        const end = job.finished_ms || Date.now();
        const t0 = h.length ? h[0].time_ms : end;
        const span = Math.max(1, end - t0);
        const segs = h.map((e, i) => {
            const until = i + 1 < h.length ? h[i + 1].time_ms : end;
            const s = el('span', {class: 'seg st-' + e.state, 'data-state': e.state,
                title: e.state + ' at ' + fmt.time(e.time_ms) + ': ' + e.reason});
            s.style.flexGrow = String(Math.max(until - e.time_ms, span / 200));
            return s;
        });
        return el('div', {class: 'timeline', id: 'timeline'}, segs);
    }

    function historyTable(job) {
        const h = job.history || [];
        const t0 = h.length ? h[0].time_ms : 0;
        return table(['time', '+s', 'state', 'reason'], h.map((e) =>
            el('tr', {class: /preempt/.test(e.state) ? 'preempt' : null},
                el('td', null, fmt.time(e.time_ms)),
                el('td', null, ((e.time_ms - t0) / 1000).toFixed(1)),
                el('td', {class: 'st st-' + e.state}, e.state), el('td', null, e.reason))),
        {id: 'history'});
    }

    function placementBox(p) {
        if (!p)
            return el('p', {id: 'placement'}, 'Not placed.');
        const gpus = (p.gpus || []).map((g) => el('li', null, 'GPU ' + g.index + ' ' +
            (g.model || '') + ' ' + g.uuid + ': ' + fmt.gib(g.memory_bytes)));
        return el('div', {id: 'placement'},
            el('p', null, 'Node ', el('strong', {'data-k': 'job-node'}, p.node),
                ', NUMA ' + p.numa + ', ' + fmt.cores(p.cpu_millis) + ' CPU, ' +
                fmt.gib(p.memory_bytes) + (p.disk ? ', disk ' + p.disk : '')),
            gpus.length ? el('ul', null, gpus) : null);
    }

    function costBox(c) {
        if (!c)
            return el('p', {id: 'cost'}, 'Not charged yet.');
        return el('p', {id: 'cost'}, num('job-cost', c.total_micros, fmt.money(c.total, c.currency)),
            ' (' + c.basis + ' basis; allocation ' + fmt.money(c.allocation) + ', usage ' +
            fmt.money(c.usage) + ', billing ' + fmt.money(c.billing) + ')' +
            (c.cap ? ', cap ' + fmt.money(c.cap) + (c.capped ? ' reached' : '') : ''));
    }

    function logLinks(job) {
        const id = encodeURIComponent(job.id);
        const links = [];
        for (let a = job.attempts || 1; a >= 1; a--)
            for (const s of ['stdout', 'stderr'])
                links.push(el('li', null, el('a', {href: '#/job/' + id + '/logs?attempt=' + a +
                    '&stream=' + s, 'data-log': a + '/' + s}, 'attempt ' + a + ' ' + s)));
        return el('ul', {id: 'logs', class: 'links'}, links);
    }

    function jobSummary(job) {
        const exit = job.exit ? 'code ' + job.exit.code + (job.exit.signal ? ', signal ' +
            job.exit.signal : '') + (job.exit.oom ? ', OOM' : '') : '-';
        const preempts = (job.history || []).filter((e) => e.state === 'preempted').length;
        const rows = [
            ['state', el('span', {'data-k': 'job-state', class: 'st st-' + job.state}, job.state)],
            ['reason', el('span', {'data-k': 'job-reason'}, job.reason || '')],
            ['tenant', job.tenant], ['priority', String(job.priority)],
            ['attempts', num('job-attempts', job.attempts)],
            ['preemptions', num('job-preemptions', preempts)],
            ['asks', resSummary(job.resources)], ['submitted', fmt.time(job.submitted_ms)],
            ['started', fmt.time(job.started_ms)], ['finished', fmt.time(job.finished_ms)],
            ['exit', exit]];
        return el('dl', {id: 'summary'}, rows.map(([k, v]) => [el('dt', null, k), el('dd', null, v)]));
    }

    async function viewJob(id) {
        const job = await api('/api/v1/jobs/' + encodeURIComponent(id));
        let cost = job.cost;
        if (!cost) {
            const m = await api('/api/v1/jobs/' + encodeURIComponent(id) + '/metrics').catch(() => null);
            cost = m && m.cost;
        }
        return el('section', {'data-job': job.id},
            el('h1', null, 'Job ' + job.id + ' ', el('span', {class: 'small'}, job.name)),
            jobSummary(job),
            el('h2', null, 'Timeline'), timeline(job), historyTable(job),
            el('h2', null, 'Placement'), placementBox(job.placement),
            el('h2', null, 'Cost'), costBox(cost),
            el('h2', null, 'Logs'), logLinks(job));
    }

    /* ---- a job's log -------------------------------------------------- */

    async function readLog(id, q) {
        const base = '/api/v1/jobs/' + encodeURIComponent(id) + '/logs?stream=' +
            encodeURIComponent(q.get('stream') || 'stdout') +
            (q.get('attempt') ? '&attempt=' + encodeURIComponent(q.get('attempt')) : '');
        let text = '', offset = 0, complete = false;
        for (let i = 0; i < 16; i++) { /* up to 1 MiB */
            const r = await api(base + '&offset=' + offset, true);
            const chunk = await r.text();
            text += chunk;
            complete = r.headers.get('X-Crater-Log-Complete') === 'true';
            offset = Number(r.headers.get('X-Crater-Log-Next') || offset);
            if (complete || !chunk.length)
                break;
        }
        return {text, complete};
    }

    async function viewLogs(id, q) {
        const log = await readLog(id, q);
        return el('section', null,
            el('h1', null, 'Job ', jobLink(id), ': attempt ' + (q.get('attempt') || 'latest') +
                ', ' + (q.get('stream') || 'stdout')),
            el('p', {class: 'note', 'data-k': 'log-complete', 'data-v': log.complete},
                log.complete ? 'The whole log.' : 'The job may still write more: Refresh.'),
            el('pre', {id: 'log', 'data-k': 'log-text'}, log.text));
    }

    /* ---- services ----------------------------------------------------- */

    function serviceRow(s) {
        const r = s.replicas || {}, l = s.load_ms || {};
        return el('tr', {'data-service': s.name},
            el('th', null, s.name), el('td', null, jobLink(String(s.job))),
            el('td', null, num('svc-ready', r.ready)), el('td', null, String(r.traffic)),
            el('td', null, r.warm + ' (' + r.warm_ready + ' ready)'), el('td', null, String(r.starting)),
            el('td', null, String(s.desired)), el('td', null, s.min + '-' + s.max),
            el('td', null, l.count ? Math.round(l.mean) + ' ms' : '-'));
    }

    async function viewServices() {
        const s = await api('/api/v1/services');
        return el('section', null,
            el('h1', null, 'Inference services'),
            el('p', {class: 'counts'}, num('services-count', s.items.length), ' services · gateway ' +
                (s.gateway_port ? 'on port ' + s.gateway_port : 'off')),
            s.items.length ? table(['service', 'job', 'ready', 'in traffic', 'warm', 'starting',
                'desired', 'min-max', 'mean load'], s.items.map(serviceRow), {id: 'services'})
                : el('p', null, 'No services: submit a job with an inference section.'));
    }

    /* ---- cost --------------------------------------------------------- */

    const COSTS = ['cpuCost', 'gpuCost', 'ramCost', 'diskCost', 'totalCost', 'totalCostMicros',
        'allocationCost', 'usageCost', 'billingCost'];

    /* The API's items are per name and step: sum each name's steps. */
    function costByName(items) {
        const by = new Map();
        for (const it of items) {
            const x = by.get(it.name) || {name: it.name};
            for (const k of COSTS)
                x[k] = (x[k] || 0) + (it[k] || 0);
            by.set(it.name, x);
        }
        return [...by.values()].sort((a, b) => b.totalCostMicros - a.totalCostMicros);
    }

    function costName(by, name, w) {
        if (name === '__idle__')
            return el('em', null, 'idle (no job)');
        if (by === 'job')
            return jobLink(name);
        if (by === 'tenant')
            return el('a', {href: '#/cost?by=job&window=' + w + '&tenant=' + encodeURIComponent(name)}, name);
        return name;
    }

    function costRow(by, w, cur, x) {
        return el('tr', {'data-name': x.name},
            el('th', null, costName(by, x.name, w)),
            ['cpuCost', 'gpuCost', 'ramCost', 'diskCost'].map((k) => el('td', null, fmt.money(x[k]))),
            el('td', null, num('cost-item', x.totalCostMicros, fmt.money(x.totalCost, cur))),
            el('td', null, fmt.money(x.usageCost)));
    }

    function costChoices(by, w, tenant) {
        const link = (b, win, label, on) => el('a', {href: '#/cost?by=' + b + '&window=' + win,
            class: on ? 'on' : null}, label);
        return el('p', {class: 'choices'}, 'By ',
            ['tenant', 'job', 'node'].map((b) => [link(b, w, b, b === by && !tenant), ' ']),
            ' · window ', ['1h', '24h', '168h'].map((x) => [link(by, x, x, x === w), ' ']));
    }

    async function viewCost(q) {
        const by = ['tenant', 'job', 'node'].includes(q.get('by')) ? q.get('by') : 'tenant';
        const w = /^[0-9]+h$/.test(q.get('window') || '') ? q.get('window') : '24h';
        const tenant = by === 'job' ? q.get('tenant') : null;
        const c = await api('/api/v1/cost?window=' + w + '&aggregate=' + by);
        let rows = costByName(c.items || []);
        if (tenant) {
            const ids = new Set((await listAll('/api/v1/jobs?tenant=' + encodeURIComponent(tenant))).map((j) => j.id));
            rows = rows.filter((x) => ids.has(x.name));
        }
        const total = rows.reduce((s, x) => s + x.totalCostMicros, 0);
        return el('section', null,
            el('h1', null, 'Cost by ' + by + (tenant ? ' of tenant ' + tenant : '') + ', last ' + w),
            costChoices(by, w, tenant),
            el('p', {class: 'counts'}, 'Total ', num('cost-total', total,
                fmt.money(total / 1e6, c.currency)), ' (' + c.basis + ' basis)'),
            table([by, 'CPU', 'GPU', 'RAM', 'disk', 'total', 'usage basis'],
                rows.map((x) => costRow(by, w, c.currency, x)), {id: 'cost'}));
    }

    /* ---- routing, login ----------------------------------------------- */

    function parseHash() {
        const h = location.hash.replace(/^#\/?/, '');
        const [path, query] = h.split('?');
        return {parts: path.split('/').filter(Boolean).map(decodeURIComponent),
            q: new URLSearchParams(query || '')};
    }

    function pickView(parts, q) {
        switch (parts[0]) {
        case 'gpus': return ['gpus', viewGpus];
        case 'queue': return ['queue', viewQueue];
        case 'services': return ['services', viewServices];
        case 'cost': return ['cost', () => viewCost(q)];
        case 'job':
            if (parts[2] === 'logs')
                return ['logs', () => viewLogs(parts[1], q)];
            return ['job', () => viewJob(parts[1])];
        default: return ['overview', viewOverview];
        }
    }

    async function render(again) {
        const main = document.getElementById('main');
        const {parts, q} = parseHash();
        const [name, view] = pickView(parts, q);
        const seq = ++renderSeq;
        if (!again)
            main.dataset.loaded = '';
        for (const a of document.querySelectorAll('[data-nav]'))
            a.classList.toggle('on', a.dataset.nav === name);
        try {
            const node = await view();
            if (seq !== renderSeq)
                return;
            main.replaceChildren(node);
        } catch (e) {
            if (e instanceof AuthError)
                return showLogin('The server refused the token: ' + e.message);
            if (seq !== renderSeq)
                return;
            main.replaceChildren(el('p', {class: 'error', role: 'alert'}, e.message));
        }
        main.dataset.page = name;
        main.dataset.hash = location.hash;
        main.dataset.loaded = name;
    }

    function showLogin(message) {
        sessionStorage.removeItem(TOKEN_KEY);
        renderSeq++;
        document.getElementById('main').replaceChildren();
        document.getElementById('nav').hidden = true;
        document.getElementById('login').hidden = false;
        document.getElementById('login-error').textContent = message || '';
        document.getElementById('token').focus();
    }

    async function login(ev) {
        ev.preventDefault();
        const input = document.getElementById('token');
        sessionStorage.setItem(TOKEN_KEY, input.value.trim());
        input.value = '';
        try {
            await api('/api/v1/nodes');
        } catch (e) {
            return showLogin('Not logged in: ' + e.message);
        }
        document.getElementById('login').hidden = true;
        document.getElementById('nav').hidden = false;
        render();
    }

    function start() {
        document.getElementById('login').addEventListener('submit', login);
        document.getElementById('logout').addEventListener('click', () => showLogin(''));
        document.getElementById('refresh').addEventListener('click', () => render(true));
        window.addEventListener('hashchange', () => render());
        setInterval(() => {
            const name = document.getElementById('main').dataset.page;
            if (sessionStorage.getItem(TOKEN_KEY) && name !== 'logs' && !document.hidden)
                render(true);
        }, REFRESH_MS);
        if (!sessionStorage.getItem(TOKEN_KEY))
            return showLogin('');
        document.getElementById('nav').hidden = false;
        render();
    }

    document.addEventListener('DOMContentLoaded', start);
})();
