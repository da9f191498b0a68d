import { compare, merge } from '../../web/console/workflow-model';

/** The builder's three-way comparison and merge after a 409 STALE_REVISION (web/console/workflow-model.ts). */
const base = {
  category: 'fulfillment',
  description: 'Orders',
  triggerPhrases: ['where is my order'],
  steps: [
    { id: 'lookup', type: 'call_api', path: '/orders/lookup' },
    { id: 'done', type: 'reply', message: 'Here they are.' },
  ],
};

describe('console workflow merge', () => {
  it('keeps both sides where they changed different things: a field and a step of theirs, a step of mine, a step each added in place', () => {
    const theirs = {
      ...base,
      triggerPhrases: ['where is my order', 'track my order'],
      steps: [base.steps[0], { id: 'thanks', type: 'reply', message: 'Thanks' }, { ...base.steps[1], message: 'Here are your orders.' }],
    };
    const mine = {
      ...base,
      description: 'Order status',
      steps: [{ ...base.steps[0], path: '/orders/find' }, base.steps[1], { id: 'bye', type: 'reply', message: 'Bye' }],
    };
    const c = compare(base, mine, theirs);
    expect(c.theirs.map((x) => `${x.label} ${x.kind}`)).toEqual(['Trigger phrases changed', 'Step done changed', 'Step thanks added']);
    expect(c.mine.map((x) => `${x.label} ${x.kind}`)).toEqual(['Description changed', 'Step lookup changed', 'Step bye added']);
    expect(c.conflicts).toEqual([]);
    expect(merge(base, mine, theirs)).toEqual({
      category: 'fulfillment',
      description: 'Order status',
      triggerPhrases: ['where is my order', 'track my order'],
      steps: [
        { id: 'lookup', type: 'call_api', path: '/orders/find' },
        { id: 'thanks', type: 'reply', message: 'Thanks' },
        { id: 'done', type: 'reply', message: 'Here are your orders.' },
        { id: 'bye', type: 'reply', message: 'Bye' },
      ],
    });
  });

  it('asks where both changed the same thing differently: mine by default, theirs when chosen; a removal on one side is kept', () => {
    const theirs = { ...base, steps: [base.steps[0], { ...base.steps[1], message: 'Theirs.' }] };
    const mine = { ...base, triggerPhrases: undefined, steps: [{ ...base.steps[1], message: 'Mine.' }] };
    const c = compare(base, mine, theirs);
    expect(c.conflicts.map((x) => x.key)).toEqual(['step:done']);
    expect(c.mine.map((x) => `${x.label} ${x.kind}`)).toEqual(['Trigger phrases removed', 'Step lookup removed', 'Step done changed']);
    expect(merge(base, mine, theirs)).toEqual({ category: 'fulfillment', description: 'Orders', steps: [{ id: 'done', type: 'reply', message: 'Mine.' }] });
    expect(merge(base, mine, theirs, { 'step:done': 'theirs' }).steps).toEqual([{ id: 'done', type: 'reply', message: 'Theirs.' }]);
  });

  it('keeps the order of the side that reordered the steps', () => {
    const mine = { ...base, steps: [base.steps[1], base.steps[0]] };
    const theirs = { ...base, description: 'Orders v2' };
    expect(compare(base, mine, theirs).mine.map((x) => x.key)).toEqual(['order']);
    expect(merge(base, mine, theirs)).toEqual({ ...base, description: 'Orders v2', steps: [base.steps[1], base.steps[0]] });
  });
});
