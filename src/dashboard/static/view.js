// Generated from src/core/view.ts by scripts/dashboard-view.mjs: do not edit (a unit test checks that
// this copy is up to date). The dashboard folds a run's events with the server's own projection.
// The last instant made into text: a run's events mostly share their millisecond. A memo of a pure
// function (one entry), so shared by every caller in the process without leaking anything (memo.ts).
let lastAt = NaN;
let lastIso = '';
export function iso(at) {
    if (at !== lastAt) {
        lastIso = new Date(at).toISOString();
        lastAt = at;
    }
    return lastIso;
}
export class RunProjection {
    view;
    edges = [];
    generations = [];
    byId = new Map();
    /** Client tools' attempts that wait for their agent: the token of each call's running attempt. */
    dispatched;
    /** Starts from the run's first event, `run.created`. */
    constructor(created) {
        if (created.type !== 'run.created')
            throw new Error(`a run's first event must be run.created, got ${created.type}`);
        const d = created.data;
        this.view = {
            id: created.runId,
            tenant: d.tenant,
            status: d.held ? 'queued' : 'running',
            failure: d.failure,
            tags: d.tags,
            createdAt: iso(created.at),
            endedAt: null,
            calls: [],
            diagnostics: [],
            ...(d.open ? { stream: 'open' } : {}),
            ...(d.priority !== undefined ? { priority: d.priority } : {}),
        };
        this.addCalls(d.calls);
    }
    static of(events) {
        const p = new RunProjection(events[0]);
        for (let i = 1; i < events.length; i++)
            p.apply(events[i]);
        return p;
    }
    call(id) {
        return this.byId.get(id);
    }
    /** The calls that wait for their agent's result, in call order (DESIGN §17). */
    work() {
        const items = [];
        if (this.dispatched === undefined || this.dispatched.size === 0)
            return items;
        for (const c of this.view.calls) {
            const d = this.dispatched.get(c.id);
            if (d === undefined || c.status !== 'running')
                continue;
            items.push({ runId: this.view.id, callId: c.id, tool: c.tool, args: c.resolvedArgs ?? c.args, attempt: d.attempt, token: d.token });
        }
        return items;
    }
    graph() {
        return {
            nodes: this.view.calls.map((c) => ({ id: c.id, tool: c.tool, status: c.status })),
            edges: this.edges,
            generations: this.generations,
        };
    }
    apply(e) {
        switch (e.type) {
            case 'run.created':
                return;
            case 'run.replanned':
                this.addCalls(e.data.calls);
                this.view.status = 'running';
                this.view.endedAt = null;
                delete this.view.replanContext;
                this.generations = e.data.generations;
                this.addStep(e.data);
                return;
            case 'run.started':
                if (this.view.status === 'queued')
                    this.view.status = 'running';
                this.generations = e.data.generations;
                this.addStep(e.data);
                return;
            case 'run.calls_added':
                this.addCalls(e.data.calls);
                this.addStep(e.data);
                return;
            case 'run.sealed':
                this.view.stream = 'sealed';
                this.generations = e.data.generations;
                this.addStep(e.data);
                return;
            case 'run.needs_replan':
                this.view.replanContext = e.data.replanContext;
                return;
            case 'run.completed':
                this.view.status = e.data.status;
                if (e.data.diagnostics)
                    this.view.diagnostics.push(...e.data.diagnostics);
                this.view.endedAt = iso(e.at);
                return;
            default: {
                const c = e.callId !== undefined ? this.byId.get(e.callId) : undefined;
                if (c) {
                    applyCallEvent(c, e);
                    this.trackDispatch(c, e);
                }
            }
        }
    }
    /** A client tool's attempt waits for its agent from its `call.started` until the call moves on. */
    trackDispatch(c, e) {
        if (e.type === 'call.started' && e.data.dispatch !== undefined)
            (this.dispatched ??= new Map()).set(c.id, { attempt: e.data.attempt, token: e.data.dispatch.token });
        else if (this.dispatched !== undefined && c.status !== 'running')
            this.dispatched.delete(c.id);
    }
    addStep(d) {
        for (const edge of d.edges) {
            this.edges.push(edge);
            this.byId.get(edge.to)?.dependsOn.push(edge.from);
        }
        this.view.diagnostics.push(...d.diagnostics);
    }
    addCalls(calls) {
        for (const call of calls) {
            const v = {
                id: call.id,
                tool: call.tool,
                args: call.args ?? {},
                status: 'pending',
                dependsOn: [],
                attempts: 0,
                output: null,
                error: null,
                blockedBy: null,
                startedAt: null,
                endedAt: null,
            };
            this.view.calls.push(v);
            this.byId.set(v.id, v);
        }
    }
}
function applyCallEvent(c, e) {
    // A wait lasts until the call's next move (it starts, ends, or waits again after a retry).
    if (c.waitingFor !== undefined && e.type !== 'call.waiting') {
        delete c.waitingFor;
        delete c.waitingSince;
    }
    switch (e.type) {
        case 'call.waiting':
            if (c.status === 'ready' && e.data.waitingFor.length > 0) {
                c.waitingFor = e.data.waitingFor.map(waitingView);
                c.waitingSince ??= iso(e.at);
            }
            else {
                delete c.waitingFor;
                delete c.waitingSince;
            }
            return;
        case 'call.ready':
            c.status = 'ready';
            return;
        case 'call.awaiting_review':
            c.status = 'awaiting_review';
            c.review = { reason: e.data.reason };
            c.resolvedArgs = e.data.args;
            return;
        case 'call.started':
            c.status = 'running';
            c.attempts = e.data.attempt;
            c.startedAt ??= iso(e.at);
            c.resolvedArgs = e.data.args;
            return;
        case 'call.retry_scheduled':
            c.status = 'pending';
            c.error = e.data.error;
            return;
        case 'call.succeeded':
            c.status = 'succeeded';
            c.output = e.data.output;
            c.error = null;
            c.endedAt = iso(e.at);
            return;
        case 'call.failed':
            c.status = 'failed';
            c.error = e.data.error;
            c.endedAt = iso(e.at);
            return;
        case 'call.blocked':
            c.status = 'blocked';
            c.blockedBy = e.data.blockedBy;
            c.endedAt = iso(e.at);
            return;
        case 'call.cancelled':
            c.status = 'cancelled';
            c.error = e.data.reason;
            c.endedAt = iso(e.at);
            return;
        case 'call.compensated': {
            const d = e.data;
            c.compensation =
                d.status === 'succeeded'
                    ? { status: d.status, ...(d.output !== undefined ? { output: d.output } : {}) }
                    : { status: d.status, error: d.error };
            return;
        }
        case 'call.hook':
            // A before_call hook's new args are the ones the call runs with.
            if (e.data.args && e.data.on === 'before_call')
                c.resolvedArgs = e.data.args;
            return;
        case 'review.decided': {
            const d = e.data;
            if (!c.review)
                return;
            c.review.decision = d.decision;
            if (d.decision !== 'reject')
                c.status = 'pending';
            if (d.comment !== undefined)
                c.review.comment = d.comment;
            if (d.args)
                c.resolvedArgs = d.args;
            return;
        }
    }
}
function waitingView(w) {
    const { retryAt, until, holders, queuedBehind, ...rest } = w;
    const v = { ...rest, holders: holders.map(holderView) };
    if (retryAt !== undefined)
        v.retryAt = iso(retryAt);
    if (until !== undefined)
        v.until = iso(until);
    if (queuedBehind !== undefined)
        v.queuedBehind = queuedBehind.map(holderView);
    return v;
}
function holderView(h) {
    return { runId: h.runId, callId: h.callId, tenant: h.tenant, since: iso(h.since) };
}
