// Over 400 lines: given/when/then cases of every workflow-engine decider.
import { deciderSpec } from '../../../libs/eventstore/src/testing';
import { emergencyKinds, healthQuestion, triggerMatches } from '../src/domain/agent';
import { Definition, validateDefinition } from '../src/domain/definition';
import { SIGN_IN_REPLY, advance, buildRequest, getPath, giveCallResult, giveInput, startRun } from '../src/domain/engine';
import { ordersToShow, parseOrdersResponse } from '../src/domain/orders';
import { KEY_CLAIM_GRACE_MS, WorkflowEvent, workflowDecider, workflowKeyDecider } from '../src/domain/workflow';
import { isBlockedAddress } from '@svc/security';
import { signature, targetUrl } from '../src/adapters/outbound/destination-client';
import { orderStatusTemplate } from '../src/domain/templates';
import { RunEvent, TURN_TAKEOVER_MS, runDecider } from '../src/domain/run';
import { WidgetTurnEvent, widgetTurnDecider } from '../src/domain/widget-turn';

const reply = (id: string, next?: string) => ({ id, type: 'reply', message: id, ...(next ? { next } : {}) });
const base = (steps: unknown[]) => ({ category: 'support', description: 'd', steps });

describe('definition validation', () => {
  it('accepts the order template', () => {
    expect(validateDefinition(orderStatusTemplate().definition)).toEqual([]);
  });
  it('names each offending step and rule', () => {
    const d = validateDefinition(base([{ id: 'A', type: 'reply', message: '' }, reply('b', 'zzz'), { id: 'c', type: 'nope' }]));
    expect(d.map((x) => x.path)).toEqual(['definition.steps[0].id', 'definition.steps[0].message', 'definition.steps[1].next', 'definition.steps[2].type']);
  });
  it('checks limits', () => {
    const many = Array.from({ length: 31 }, (_, i) => reply(`s${i}`));
    expect(validateDefinition(base(many)).map((x) => x.path)).toContain('definition.steps');
    expect(validateDefinition({ ...base([reply('a')]), triggerPhrases: Array(21).fill('x') }).map((x) => x.path)).toContain('definition.triggerPhrases');
    expect(validateDefinition({ ...base([reply('a')]), schema: 3 }).map((x) => x.path)).toContain('definition.schema');
  });
  it('counts characters as the spec does (code points: an emoji is one character)', () => {
    const emoji = '\u{1F600}';
    expect(validateDefinition({ ...base([reply('a')]), description: emoji.repeat(300) })).toEqual([]);
    expect(validateDefinition({ ...base([reply('a')]), description: emoji.repeat(301) }).map((x) => x.path)).toEqual(['definition.description']);
    expect(validateDefinition(base([{ id: 'a', type: 'reply', message: emoji.repeat(1000) }]))).toEqual([]);
  });
  it('sets no length on a trigger or exclude phrase, but refuses an empty one (it would match every message)', () => {
    expect(validateDefinition({ ...base([reply('a')]), triggerPhrases: ['x'.repeat(500)], excludePhrases: ['y'.repeat(201)] })).toEqual([]);
    expect(validateDefinition({ ...base([reply('a')]), triggerPhrases: ['', '  '] }).map((x) => x.path)).toEqual([
      'definition.triggerPhrases[0]',
      'definition.triggerPhrases[1]',
    ]);
  });
  it('orders_v1: takes the order_lookup.requested payload as body in any key order, and refuses what the patient typed', () => {
    const lookup = (extra: object) => ({
      id: 'look',
      type: 'call_api',
      destinationStableKey: 'shop',
      method: 'POST',
      readOnly: true,
      path: '/orders/lookup',
      contract: 'orders_v1',
      save: [],
      notFoundReply: 'n',
      errorReply: 'e',
      ...extra,
    });
    const reordered = { patient: { externalId: '{{patient.externalId}}' }, requestId: '{{run.id}}', type: 'order_lookup.requested', version: 1 };
    expect(validateDefinition(base([lookup({ body: reordered })]))).toEqual([]);
    expect(validateDefinition(base([lookup({ body: { ...reordered, version: 2 } })])).map((x) => x.path)).toEqual(['definition.steps[0].body']);
    const ask = { id: 'which', type: 'ask', variable: 'orderNo', prompt: 'Which order?', format: 'order_number' };
    const typed = validateDefinition(base([ask, lookup({ path: '/orders/lookup?n={{orderNo}}', ownership: { emailPath: 'customer.email' } })]));
    expect(typed).toEqual([{ path: 'definition.steps[1].path', message: expect.stringMatching(/order lookup never contains what the patient typed/) }]);
  });
  it('refuses an orders_v1 call made with GET (its body is the order_lookup.requested payload)', () => {
    const t = orderStatusTemplate();
    const steps = t.definition.steps.map((s: { type: string }) => (s.type === 'call_api' ? { ...s, method: 'GET' } : s));
    const problems = validateDefinition({ ...t.definition, steps } as Definition);
    expect(problems.map((p) => p.message)).toContainEqual(expect.stringContaining('cannot be a GET'));
  });

  it('refuses a cycle without an ask, allows one through an ask', () => {
    expect(
      validateDefinition(base([reply('a', 'b'), reply('b', 'a')]))
        .map((x) => x.message)
        .join(),
    ).toMatch(/cycle without an ask/);
    expect(validateDefinition(base([{ id: 'q', type: 'ask', variable: 'v', prompt: 'p', format: 'text' }, reply('b', 'q')]))).toEqual([]);
  });
  it('requires ownership and confirm before an account-changing call, on every path', () => {
    const call = (id: string, extra: object) => ({
      id,
      type: 'call_api',
      destinationStableKey: 'shop',
      method: 'POST',
      path: '/x',
      save: [],
      notFoundReply: 'n',
      errorReply: 'e',
      ...extra,
    });
    const ok = base([
      call('look', { readOnly: true, ownership: { patientIdPath: 'p' } }),
      { id: 'c', type: 'confirm', prompt: 'p', declineReply: 'd' },
      call('change', {}),
    ]);
    expect(validateDefinition(ok)).toEqual([]);
    const skip = base([
      { id: 'cond', type: 'condition', variable: 'x', operator: 'is_empty', then: 'change', else: 'look' },
      call('look', { readOnly: true, ownership: { patientIdPath: 'p' } }),
      { id: 'c', type: 'confirm', prompt: 'p', declineReply: 'd' },
      call('change', {}),
    ]);
    const msgs = validateDefinition(skip).map((x) => `${x.path} ${x.message}`);
    expect(msgs).toEqual([expect.stringMatching(/steps\[3\].*ownership/), expect.stringMatching(/steps\[3\].*confirm/)]);
  });
});

const def = (steps: unknown[]) => base(steps) as unknown as Definition;
const ctx = { runId: 'run-1', patient: { email: 'p@example.test', externalId: 'ext 1' } };

describe('step machine', () => {
  it('templates, URL-encodes the path and JSON-escapes the body', () => {
    const r = buildRequest(
      {
        id: 'c',
        type: 'call_api',
        destinationStableKey: 'x',
        method: 'POST',
        path: '/p/{{v}}?id={{patient.externalId}}',
        body: { note: '{{v}} for {{run.id}}' },
        save: [],
        notFoundReply: 'n',
        errorReply: 'e',
      },
      { v: 'a/b "q"' },
      ctx,
    );
    expect(r.path).toBe('/p/a%2Fb%20%22q%22?id=ext%201');
    expect(JSON.parse(r.body!)).toEqual({ note: 'a/b "q" for run-1' });
  });
  it('asks, validates formats, counts photos and evaluates conditions', () => {
    const d = def([
      { id: 'n', type: 'ask', variable: 'count', prompt: 'How many?', format: 'number' },
      { id: 'ph', type: 'ask', variable: 'pics', prompt: 'Photos?', format: 'photos' },
      { id: 'c', type: 'condition', variable: 'pics', operator: 'equals', value: '2', then: 'yes', else: 'no' },
      reply('yes', 'end'),
      reply('no'),
    ]);
    let r = advance(d, startRun(d), ctx);
    expect(r.next.kind).toBe('await');
    r = giveInput(d, r.state, ctx, 'many');
    expect(r.state.steps.at(-1)!.outcome).toBe('invalid_answer');
    r = giveInput(d, r.state, ctx, '3');
    expect(r.replies).toEqual([
      { type: 'text', text: 'Photos?' },
      { type: 'upload', variable: 'pics' },
    ]);
    r = giveInput(d, r.state, ctx, 'here', 2);
    expect(r.replies).toEqual([{ type: 'text', text: 'yes' }]);
    expect(r.state.outcome).toBe('completed');
  });
  it.each([
    ['equals', 'blue', 'blue', 'yes'],
    ['equals', 'Blue ', 'blue', 'yes'], // trimmed, case-insensitive
    ['not_equals', 'red', 'blue', 'yes'],
    ['not_equals', 'blue', 'blue', 'no'],
    ['contains', 'dark blue', 'blue', 'yes'],
    ['contains', 'red', 'blue', 'no'],
    ['is_empty', '', undefined, 'yes'],
    ['is_empty', 'x', undefined, 'no'],
    ['is_not_empty', 'x', undefined, 'yes'],
    ['is_not_empty', '', undefined, 'no'],
  ])('condition %s: %j against %j goes to %s', (operator, answer, value, expected) => {
    const condition = { id: 'c', type: 'condition', variable: 'colour', operator, ...(value !== undefined ? { value } : {}), then: 'yes', else: 'no' };
    // An empty answer is a variable never set (an ask refuses empty text).
    const d =
      answer === ''
        ? def([condition, reply('yes', 'end'), reply('no')])
        : def([{ id: 'q', type: 'ask', variable: 'colour', prompt: 'Colour?', format: 'text' }, condition, reply('yes', 'end'), reply('no')]);
    const r = answer === '' ? advance(d, startRun(d), ctx) : giveInput(d, advance(d, startRun(d), ctx).state, ctx, answer);
    expect(r.replies.at(-1)).toEqual({ type: 'text', text: expected });
  });

  it('variables named like Object.prototype members are unset until asked, never the inherited member', () => {
    const d = def([
      { id: 'c', type: 'condition', variable: 'constructor', operator: 'is_empty', then: 'r', else: 'no' },
      { id: 'r', type: 'reply', message: '[{{constructor}}][{{toString}}][{{valueOf}}]', next: 'q' },
      { id: 'q', type: 'ask', variable: 'hasOwnProperty', prompt: 'Name?', format: 'text' },
      { id: 'c2', type: 'condition', variable: 'valueOf', operator: 'is_not_empty', then: 'no', else: 'end2' },
      { id: 'end2', type: 'reply', message: 'v={{hasOwnProperty}}', next: 'end' },
      reply('no'),
    ]);
    let r = advance(d, startRun(d), ctx);
    expect(r.replies).toEqual([
      { type: 'text', text: '[][][]' },
      { type: 'text', text: 'Name?' },
    ]);
    r = giveInput(d, r.state, ctx, 'zz');
    expect(r.replies).toEqual([{ type: 'text', text: 'v=zz' }]);
    const req = buildRequest(
      {
        id: 'c',
        type: 'call_api',
        destinationStableKey: 'x',
        method: 'POST',
        path: '/p/{{toString}}',
        body: { a: '{{constructor}}' },
        save: [],
        notFoundReply: 'n',
        errorReply: 'e',
      },
      {},
      ctx,
    );
    expect(req.path).toBe('/p/');
    expect(JSON.parse(req.body!)).toEqual({ a: '' });
  });

  it('reads response paths through own members only', () => {
    expect(getPath({ a: { b: 1 } }, 'a.b')).toBe(1);
    expect(getPath({ a: {} }, 'a.constructor')).toBeUndefined();
    expect(getPath({ a: [1, 2] }, 'a.1')).toBe(2);
    expect(getPath({ a: [1, 2] }, 'a.length')).toBeUndefined();
    expect(getPath({}, 'toString')).toBeUndefined();
  });

  it('orders_v1: cards, broken contract, empty', () => {
    const d = orderStatusTemplate().definition;
    const started = advance(d, startRun(d), ctx);
    expect(started.next.kind).toBe('call');
    const ok = giveCallResult(d, started.state, ctx, { kind: 'response', status: 200, body: { orders: [{ id: '1', status: 'shipped' }] } });
    expect(ok.replies[0]).toMatchObject({ type: 'orders' });
    expect(ok.state.vars).toMatchObject({ orderCount: '1', latestOrderStatus: 'shipped' });
    expect(giveCallResult(d, started.state, ctx, { kind: 'response', status: 200, body: { orders: [{ id: '1', status: 'lost' }] } }).state.outcome).toBe(
      'call_failed',
    );
    expect(giveCallResult(d, started.state, ctx, { kind: 'response', status: 200, body: { orders: [] } }).state.outcome).toBe('not_found');
    expect(giveCallResult(d, started.state, ctx, { kind: 'failed', reason: 'timeout' }).state.outcome).toBe('call_failed');
    const anon = advance(d, startRun(d), { runId: 'r', patient: { email: null, externalId: null } });
    expect(anon.next.kind).toBe('ended');
    expect(anon.state.outcome).toBe('sign_in_required');
  });
  it("orders_v1: a response that ownership says is not the patient's reads as not found", () => {
    const d = def([
      {
        id: 'look',
        type: 'call_api',
        destinationStableKey: 'shop',
        method: 'POST',
        readOnly: true,
        path: '/orders/lookup',
        contract: 'orders_v1',
        ownership: { emailPath: 'customer.email' },
        save: [],
        notFoundReply: 'none',
        errorReply: 'e',
      },
    ]);
    const started = advance(d, startRun(d), ctx);
    const orders = [{ id: 'C1', status: 'shipped' }];
    const other = giveCallResult(d, started.state, ctx, { kind: 'response', status: 200, body: { customer: { email: 'someone@else.example' }, orders } });
    expect(other.state.outcome).toBe('not_found');
    expect(other.replies).toEqual([{ type: 'text', text: 'none' }]);
    const mine = giveCallResult(d, started.state, ctx, { kind: 'response', status: 200, body: { customer: { email: 'P@example.test' }, orders } });
    expect(mine.replies[0]).toMatchObject({ type: 'orders' });
  });
  it('orders_v1: never sends what the patient typed, even when the definition got past validation', () => {
    const d = def([
      { id: 'which', type: 'ask', variable: 'orderNo', prompt: 'Which order?', format: 'text' },
      {
        id: 'look',
        type: 'call_api',
        destinationStableKey: 'shop',
        method: 'POST',
        readOnly: true,
        path: '/orders/lookup?n={{orderNo}}',
        contract: 'orders_v1',
        ownership: { emailPath: 'customer.email' },
        save: [],
        notFoundReply: 'n',
        errorReply: 'e',
      },
    ]);
    const asked = advance(d, startRun(d), ctx);
    const r = giveInput(d, asked.state, ctx, 'A-555', 0);
    expect(r.next.kind).toBe('ended');
    expect(r.state.steps.at(-1)!.outcome).toBe('rule_violation');
  });
  it('enforces the ordering rule again at run time', () => {
    // A definition that bypassed validation: an account-changing call without confirm.
    const d = def([{ id: 'x', type: 'call_api', destinationStableKey: 'k', method: 'DELETE', path: '/a', save: [], notFoundReply: 'n', errorReply: 'e' }]);
    const r = advance(d, startRun(d), ctx);
    expect(r.next.kind).toBe('ended');
    expect(r.state.steps[0].outcome).toBe('rule_violation');
  });
});

describe('calls that identify the patient', () => {
  const anon = { runId: 'r', patient: { email: null, externalId: null } };
  const noEmail = { runId: 'r', patient: { email: null, externalId: 'ext 1' } };
  const call = (over: Record<string, unknown>) =>
    def([
      { id: 'c', type: 'call_api', destinationStableKey: 'k', method: 'GET', path: '/plans', save: [], notFoundReply: 'n', errorReply: 'e', ...over },
      reply('done'),
    ]);
  it.each([
    ['the path names patient.externalId', { path: '/plans/{{patient.externalId}}' }],
    ['the path names patient.email', { path: '/plans?email={{ patient.email }}' }],
    ['the body names patient.email', { method: 'POST', readOnly: true, body: { who: ['{{patient.email}}'] } }],
    ['select.equals names patient.externalId', { select: { listPath: 'plans', matchPath: 'owner', equals: '{{patient.externalId}}' } }],
  ])('%s: an anonymous visitor is asked to sign in and nothing is sent', (_name, over) => {
    const r = advance(call(over), startRun(call(over)), anon);
    expect(r.next.kind).toBe('ended');
    expect(r.replies).toEqual([{ type: 'text', text: SIGN_IN_REPLY }]);
    expect(r.state.outcome).toBe('sign_in_required');
  });
  it('a call naming neither is sent for an anonymous visitor too', () => {
    const d = call({ path: '/opening-hours' });
    expect(advance(d, startRun(d), anon).next).toMatchObject({ kind: 'call', request: { path: '/opening-hours' } });
  });
  it('a signed-in patient whose token carried no email is never asked to sign in: a call needing the email ends with its errorReply', () => {
    for (const over of [{ path: '/plans?email={{patient.email}}' }, { ownership: { emailPath: 'owner.email' } }]) {
      const d = call(over);
      const r = advance(d, startRun(d), noEmail);
      expect(r.next.kind).toBe('ended');
      expect(r.replies).toEqual([{ type: 'text', text: 'e' }]);
      expect(r.state.outcome).toBe('error');
      expect(r.state.steps.at(-1)!.outcome).toBe('patient_email_missing');
    }
    const byId = call({ path: '/plans/{{patient.externalId}}' });
    expect(advance(byId, startRun(byId), noEmail).next).toMatchObject({ kind: 'call', request: { path: '/plans/ext%201' } });
  });
});

describe('confirm answers', () => {
  const d = def([{ id: 'c', type: 'confirm', prompt: 'Proceed?', declineReply: 'Declined' }, reply('Confirmed')]);
  const answer = (text: string) => giveInput(d, advance(d, startRun(d), ctx).state, ctx, text).replies[0];
  const text = (t: string) => ({ type: 'text', text: t });
  it.each(['yes', 'Yes.', 'YES!', 'Sí.', 'ok...', 'de acuerdo.'])('%j is yes', (t) => expect(answer(t)).toEqual(text('Confirmed')));
  it.each(['no', 'No.', 'no gracias.', 'Cancel!'])('%j is no', (t) => expect(answer(t)).toEqual(text('Declined')));
  it.each(['yes please', 'maybe', '.', 'y.e.s'])('%j is asked again', (t) => expect(answer(t)).toEqual(text('Please answer yes or no. Proceed?')));
});

describe('orders contract', () => {
  it('sorts latest first only when every order has placedAt, shows three, drops unsafe tracking links', () => {
    const orders = parseOrdersResponse({
      orders: [
        { id: 'a', status: 'delivered', placedAt: '2026-01-01', trackingUrl: 'https://t.example/a' },
        { id: 'b', status: 'shipped', placedAt: '2026-03-01T00:00:00+02:00', trackingUrl: 'http://t.example/b' },
        { id: 'c', status: 'processing', placedAt: '2026-02-01', trackingUrl: 'https://u:p@t.example/c' },
        { id: 'd', status: 'cancelled', placedAt: '2025-01-01' },
      ],
    })!;
    expect(ordersToShow(orders).map((o) => o.id)).toEqual(['b', 'c', 'a']);
    expect(orders.map((o) => o.trackingUrl)).toEqual(['https://t.example/a', null, null, null]);
    expect(
      ordersToShow(
        parseOrdersResponse({
          orders: [
            { id: 'x', status: 'shipped' },
            { id: 'y', status: 'shipped', placedAt: '2026-01-01' },
          ],
        })!,
      ).map((o) => o.id),
    ).toEqual(['x', 'y']);
  });
  it('refuses what breaks the contract', () => {
    for (const body of [
      {},
      { orders: 'x' },
      { orders: Array(51).fill({ id: '1', status: 'shipped' }) },
      { orders: [{ id: '', status: 'shipped' }] },
      { orders: [{ id: '1', status: 'shipped', placedAt: '01/02/2026' }] },
      { orders: [{ id: '1', status: 'shipped', items: [{ name: 'x', quantity: 0 }] }] },
    ])
      expect(parseOrdersResponse(body)).toBeNull();
  });
  it('refuses dates that do not exist (no roll-over into the next month), accepts real ones and leap days', () => {
    for (const d of ['2024-02-30', '2025-02-29', '2026-04-31', '2026-13-01', '2026-00-10', '2026-02-30T10:00:00Z'])
      expect(parseOrdersResponse({ orders: [{ id: '1', status: 'shipped', estimatedDelivery: d }] })).toBeNull();
    for (const d of ['2024-02-29', '2026-12-31', '2026-02-28T23:59:59.5+01:00'])
      expect(parseOrdersResponse({ orders: [{ id: '1', status: 'shipped', placedAt: d }] })).not.toBeNull();
  });
  it('placedAt may leave out the time zone (ISO 8601); estimatedDelivery may not', () => {
    expect(parseOrdersResponse({ orders: [{ id: '1', status: 'shipped', placedAt: '2024-03-01T10:00:00' }] })).not.toBeNull();
    expect(parseOrdersResponse({ orders: [{ id: '1', status: 'shipped', estimatedDelivery: '2024-03-01T10:00:00' }] })).toBeNull();
  });
  it('counts characters as code points (an emoji is one)', () => {
    const emoji = '\u{1F4E6}';
    expect(parseOrdersResponse({ orders: [{ id: emoji.repeat(64), status: 'shipped', items: [{ name: emoji.repeat(120), quantity: 1 }] }] })).not.toBeNull();
    expect(parseOrdersResponse({ orders: [{ id: emoji.repeat(65), status: 'shipped' }] })).toBeNull();
  });
});

describe('agent heuristics', () => {
  it('finds emergency terms in English and Spanish, accent-insensitive', () => {
    expect(emergencyKinds('I have CHEST PAIN')).toEqual(['chest_pain']);
    expect(emergencyKinds('no puedo respirar')).toEqual(['breathing']);
    expect(emergencyKinds('Tomé una sobredosis')).toEqual(['overdose']);
    expect(emergencyKinds('where is my order')).toEqual([]);
  });
  it('recognises health questions', () => {
    expect(healthQuestion('What dose should I take?')).toEqual({ matched: true, priority: 'routine' });
    expect(healthQuestion('el dolor es peor hoy')).toEqual({ matched: true, priority: 'urgent' });
    expect(healthQuestion('I have had high fevers since Monday')).toEqual({ matched: true, priority: 'urgent' });
    expect(healthQuestion('where is my order').matched).toBe(false);
  });
  it('matches trigger phrases (EN/ES) unless an exclude phrase is present', () => {
    const d = orderStatusTemplate().definition;
    expect(triggerMatches(d, '¿Dónde está mi pedido?')).toBe(true);
    expect(triggerMatches(d, 'Where is my order??')).toBe(true);
    expect(triggerMatches(d, 'please cancel my order, where is my order')).toBe(false);
    // Whole words: a phrase inside other words is no match.
    expect(triggerMatches(d, 'somewhere is my orderly')).toBe(false);
    expect(triggerMatches(d, 'hi! where is my order. thanks')).toBe(true);
  });
});

describe('destination client helpers', () => {
  it('blocks loopback, link-local and private addresses', () => {
    for (const a of [
      '127.0.0.1',
      '10.1.2.3',
      '172.16.0.1',
      '192.168.1.1',
      '169.254.169.254',
      '0.0.0.0',
      '::1',
      'fe80::1',
      'fd00::1',
      '::ffff:127.0.0.1',
      '::ffff:7f00:1',
      '0:0:0:0:0:ffff:127.0.0.1',
      '::ffff:a9fe:a9fe',
      '::127.0.0.1',
      '::7f00:1',
      '::ffff:0:7f00:1',
      '64:ff9b:1::a00:1',
      '100.64.0.1',
    ])
      expect(isBlockedAddress(a)).toBe(true);
    for (const a of ['93.184.216.34', '2606:4700::1111']) expect(isBlockedAddress(a)).toBe(false);
  });
  it('joins the base path and signs the path actually sent', () => {
    for (const path of ['/orders/../cancel', '/orders/./x', '/%2e%2e/admin', '/a/%2E.', '..', '/..\\..\\admin', '/orders\\..\\cancel', '/x/.\t./y', '/x/.\n/y'])
      expect(() => targetUrl('https://shop.example/api', path)).toThrow('dot segment');
    expect(targetUrl('https://shop.example/api', '/orders/a..b/x?q=..').pathname).toBe('/api/orders/a..b/x');
    const u = targetUrl('https://shop.example/api/?k=1', '/orders/lookup?x=2');
    expect(`${u.pathname}${u.search}`).toBe('/api/orders/lookup?k=1&x=2');
    expect(signature('s', 1700000000, 'POST', '/a', '{}')).toMatch(/^v1=[a-f0-9]{64}$/);
  });
});

describe('workflow decider', () => {
  const audit = { by: 'u', action: 'x', at: '2026-01-01T00:00:00.000Z' };
  const created: WorkflowEvent = {
    type: 'WorkflowCreated',
    workflowId: 'w',
    organizationId: 'o',
    environmentId: 'e',
    stableKey: 'k',
    name: 'n',
    versionId: 'v1',
    definition: orderStatusTemplate().definition,
    audit,
  };
  const tested: WorkflowEvent = { type: 'VersionTested', versionId: 'v1', revision: 1, passed: true, runId: 'r', audit };
  it('activates a draft tested within 24 hours, not later', () => {
    deciderSpec(workflowDecider)
      .given([created, tested])
      .when({ type: 'Activate', versionId: 'v1', expectedRevision: 1, destinationsMissing: [], by: 'u' }, new Date('2026-01-01T23:00:00Z'))
      .then([{ type: 'VersionActivated', versionId: 'v1', retiredVersionId: null, audit: { by: 'u', action: 'activate', at: '2026-01-01T23:00:00.000Z' } }]);
    deciderSpec(workflowDecider)
      .given([created, tested])
      .when({ type: 'Activate', versionId: 'v1', expectedRevision: 1, destinationsMissing: [], by: 'u' }, new Date('2026-01-02T00:00:01Z'))
      .thenThrows('VALIDATION_FAILED');
  });
  it('refuses stale revisions, locked versions, ever-live deletes and archived edits', () => {
    const live: WorkflowEvent = { type: 'VersionActivated', versionId: 'v1', retiredVersionId: null, audit };
    deciderSpec(workflowDecider)
      .given([created])
      .when({ type: 'SaveDraft', versionId: 'v1', expectedRevision: 2, definition: created.definition, by: 'u' })
      .thenThrows('STALE_REVISION');
    deciderSpec(workflowDecider)
      .given([created, tested, live])
      .when({ type: 'SaveDraft', versionId: 'v1', expectedRevision: 1, definition: created.definition, by: 'u' })
      .thenThrows('VERSION_LOCKED');
    deciderSpec(workflowDecider).given([created, tested, live]).when({ type: 'Delete', by: 'u' }).thenThrows('WORKFLOW_EVER_LIVE');
    deciderSpec(workflowDecider)
      .given([created, { type: 'WorkflowArchived', retiredVersionId: null, audit }])
      .when({ type: 'Rename', name: 'z', by: 'u' })
      .thenThrows('WORKFLOW_ARCHIVED');
  });
});

describe('stableKey claims (S2: never blocked forever)', () => {
  const at = '2026-01-01T00:00:00.000Z';
  const claimed = { type: 'KeyClaimed' as const, workflowId: 'w1', at };
  const soon = new Date(Date.parse(at) + 1000);
  const later = new Date(Date.parse(at) + KEY_CLAIM_GRACE_MS);
  it('refuses a second claim while the holder exists', () => {
    deciderSpec(workflowKeyDecider).given([claimed]).when({ type: 'Claim', workflowId: 'w2', holderCheck: null }, later).thenThrows('DUPLICATE_KEY');
  });
  it('takes over a key whose holder was deleted but never released', () => {
    deciderSpec(workflowKeyDecider)
      .given([claimed])
      .when({ type: 'Claim', workflowId: 'w2', holderCheck: { holder: 'w1', found: 'deleted' } }, soon)
      .then([{ type: 'KeyClaimed', workflowId: 'w2', at: soon.toISOString(), takenOverFrom: 'w1' }]);
  });
  it('takes over a key whose holder was never created, after the grace period only', () => {
    deciderSpec(workflowKeyDecider)
      .given([claimed])
      .when({ type: 'Claim', workflowId: 'w2', holderCheck: { holder: 'w1', found: 'missing' } }, soon)
      .thenThrows('DUPLICATE_KEY');
    deciderSpec(workflowKeyDecider)
      .given([claimed])
      .when({ type: 'Claim', workflowId: 'w2', holderCheck: { holder: 'w1', found: 'missing' } }, later)
      .then([{ type: 'KeyClaimed', workflowId: 'w2', at: later.toISOString(), takenOverFrom: 'w1' }]);
  });
  it('ignores a check about another holder (the key changed hands meanwhile)', () => {
    deciderSpec(workflowKeyDecider)
      .given([claimed, { type: 'KeyReleased', workflowId: 'w1', at }, { type: 'KeyClaimed', workflowId: 'w3', at }])
      .when({ type: 'Claim', workflowId: 'w2', holderCheck: { holder: 'w1', found: 'deleted' } }, later)
      .thenThrows('DUPLICATE_KEY');
  });
});

describe('run turns (B1: one answer per turn)', () => {
  const at = '2026-01-01T00:00:00.000Z';
  const header = { organizationId: 'o', environmentId: 'e', runId: 'r', workflowId: 'w', versionId: 'v', conversationId: 'c', startedAt: at };
  const waiting = {
    ...startRun({ category: 'support', description: 'd', steps: [{ id: 'a', type: 'reply', message: 'a' }] } as unknown as Definition),
    status: 'waiting' as const,
  };
  const started: RunEvent[] = [
    { type: 'workflow_run.started', ...header },
    { type: 'RunAdvanced', state: waiting, at, turn: 0 },
  ];
  it('claims the next turn while the run waits', () => {
    deciderSpec(runDecider)
      .given(started)
      .when({ type: 'StartTurn', turn: 1 })
      .then([{ type: 'TurnStarted', turn: 1, at: '2026-01-01T00:00:00.000Z' }]);
  });
  it('refuses a second claim of an open turn, and a claim of a past turn', () => {
    deciderSpec(runDecider)
      .given([...started, { type: 'TurnStarted', turn: 1, at }])
      .when({ type: 'StartTurn', turn: 1 })
      .thenThrows('TURN_IN_PROGRESS');
    deciderSpec(runDecider)
      .given([...started, { type: 'TurnStarted', turn: 1, at }, { type: 'RunAdvanced', state: waiting, at, turn: 1 }])
      .when({ type: 'StartTurn', turn: 1 })
      .thenThrows('TURN_IN_PROGRESS');
  });
  it('refuses a claim once the run ended', () => {
    deciderSpec(runDecider)
      .given([...started, { type: 'TurnStarted', turn: 1, at }, { type: 'RunAdvanced', state: { ...waiting, status: 'ended' }, at, turn: 1 }])
      .when({ type: 'StartTurn', turn: 2 })
      .thenThrows('TURN_IN_PROGRESS');
  });
  it('takes over a turn abandoned longer than any turn can take', () => {
    const late = new Date(Date.parse(at) + TURN_TAKEOVER_MS);
    deciderSpec(runDecider)
      .given([...started, { type: 'TurnStarted', turn: 1, at }])
      .when({ type: 'StartTurn', turn: 1 }, late)
      .then([{ type: 'TurnStarted', turn: 1, at: late.toISOString() }]);
  });
  it('Advance answers only the open turn', () => {
    deciderSpec(runDecider).given(started).when({ type: 'Advance', turn: 1, state: waiting }).thenThrows('TURN_IN_PROGRESS');
    deciderSpec(runDecider)
      .given([...started, { type: 'TurnStarted', turn: 1, at }])
      .when({ type: 'Advance', turn: 2, state: waiting })
      .thenThrows('TURN_IN_PROGRESS');
    deciderSpec(runDecider)
      .given([...started, { type: 'TurnStarted', turn: 1, at }])
      .when({ type: 'Advance', turn: 1, state: waiting })
      .then([{ type: 'RunAdvanced', state: waiting, at, turn: 1 }]);
  });
});

describe('widget turn decider (Idempotency-Key of widget messages)', () => {
  const at = new Date('2026-11-25T10:00:00.000Z');
  const fold = (events: WidgetTurnEvent[]) => events.reduce(widgetTurnDecider.evolve, widgetTurnDecider.initialState());
  const answer = { conversationId: 'c', replies: [{ type: 'text', text: 'hi' }], handedOff: false };
  it('claims once, answers once; a retry of the same message finds the answer, another message is refused', () => {
    const claimed = widgetTurnDecider.decide({ type: 'Claim', claimId: 'c1', bodyHash: 'h', leaseMs: 60_000 }, fold([]), at);
    expect(claimed).toEqual([{ type: 'WidgetTurnClaimed', claimId: 'c1', bodyHash: 'h', claimedAt: at.toISOString(), leaseUntil: '2026-11-25T10:01:00.000Z' }]);
    expect(() => widgetTurnDecider.decide({ type: 'Claim', claimId: 'c1', bodyHash: 'h', leaseMs: 60_000 }, fold(claimed), at)).toThrow(
      expect.objectContaining({ code: 'TURN_IN_PROGRESS', status: 409 }),
    );
    expect(() => widgetTurnDecider.decide({ type: 'Claim', claimId: 'c2', bodyHash: 'other', leaseMs: 60_000 }, fold(claimed), at)).toThrow(
      expect.objectContaining({ code: 'IDEMPOTENCY_KEY_REUSED' }),
    );
    // The lease ran out (the first sender died): the next sender claims it.
    const later = new Date('2026-11-25T10:01:00.001Z');
    const taken = [...claimed, ...widgetTurnDecider.decide({ type: 'Claim', claimId: 'c3', bodyHash: 'h', leaseMs: 60_000 }, fold(claimed), later)];
    expect(taken).toHaveLength(2);
    // The first sender, late, records nothing over the new holder's claim (nor releases it).
    expect(widgetTurnDecider.decide({ type: 'Answer', claimId: 'c1', bodyHash: 'h', answer }, fold(taken), later)).toEqual([]);
    expect(widgetTurnDecider.decide({ type: 'Release', claimId: 'c1' }, fold(taken), later)).toEqual([]);
    // The taker found the turn busy and let go: the first sender's answer is then the turn's.
    const letGo = [...taken, ...widgetTurnDecider.decide({ type: 'Release', claimId: 'c3' }, fold(taken), later)];
    expect(widgetTurnDecider.decide({ type: 'Answer', claimId: 'c1', bodyHash: 'h', answer }, fold(letGo), later).map((e) => e.type)).toEqual([
      'WidgetTurnAnswered',
    ]);
    const answered = [...claimed, ...widgetTurnDecider.decide({ type: 'Answer', claimId: 'c1', bodyHash: 'h', answer }, fold(claimed), at)];
    expect(fold(answered)).toEqual({ claim: null, answer: { bodyHash: 'h', answer } });
    expect(widgetTurnDecider.decide({ type: 'Claim', claimId: 'c1', bodyHash: 'h', leaseMs: 60_000 }, fold(answered), at)).toEqual([]);
    expect(() => widgetTurnDecider.decide({ type: 'Claim', claimId: 'c2', bodyHash: 'other', leaseMs: 60_000 }, fold(answered), at)).toThrow(
      expect.objectContaining({ code: 'IDEMPOTENCY_KEY_REUSED' }),
    );
    expect(widgetTurnDecider.decide({ type: 'Answer', claimId: 'c1', bodyHash: 'h', answer }, fold(answered), at)).toEqual([]);
    expect(widgetTurnDecider.decide({ type: 'Release', claimId: 'c1' }, fold(answered), at)).toEqual([]);
  });
  it('a released claim lets the retry answer at once', () => {
    const claimed = widgetTurnDecider.decide({ type: 'Claim', claimId: 'c1', bodyHash: 'h', leaseMs: 60_000 }, fold([]), at);
    const released = [...claimed, ...widgetTurnDecider.decide({ type: 'Release', claimId: 'c1' }, fold(claimed), at)];
    expect(widgetTurnDecider.decide({ type: 'Claim', claimId: 'c1', bodyHash: 'h', leaseMs: 60_000 }, fold(released), at)).toHaveLength(1);
  });
});
