import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { deciderSpec } from '../../../libs/eventstore/src/testing';
import { claimDecider } from '../src/domain/claim';

/** S6: one write path. Claims are a decider behind the CommandHandler; timers go only by events. */

describe('claim decider (first writer wins)', () => {
  const spec = deciderSpec(claimDecider);
  const now = new Date('2026-03-01T10:00:00.000Z');

  it('the first claim appends, a later one decides nothing (the holder stays the first)', () => {
    spec
      .given([])
      .when({ type: 'Claim', claim: { type: 'EventIdClaimed', bodyHash: 'h1' } }, now)
      .then([{ type: 'EventIdClaimed', bodyHash: 'h1' }]);
    spec
      .given([{ type: 'EventIdClaimed', bodyHash: 'h1' }])
      .when({ type: 'Claim', claim: { type: 'EventIdClaimed', bodyHash: 'h2' } }, now)
      .then([]);
    spec
      .given([{ type: 'ProgramKeyClaimed', protocolId: 'p1', programKey: 'k' }])
      .when({ type: 'Claim', claim: { type: 'ProgramKeyClaimed', protocolId: 'p2', programKey: 'k' } }, now)
      .then([]);
    spec
      .given([])
      .when({ type: 'Claim', claim: { type: 'PatientIdentityAssigned', patientId: 'x' } }, now)
      .then([{ type: 'PatientIdentityAssigned', patientId: 'x' }]);
  });

  it('a refused eventId is released for its own body only, and can then be claimed again', () => {
    const claimed = { type: 'EventIdClaimed' as const, bodyHash: 'h1' };
    spec
      .given([claimed])
      .when({ type: 'ReleaseEventId', bodyHash: 'h1', code: 'PROTOCOL_NOT_FOUND' }, now)
      .then([{ type: 'EventIdReleased', bodyHash: 'h1', code: 'PROTOCOL_NOT_FOUND', at: now.toISOString() }]);
    spec.given([claimed]).when({ type: 'ReleaseEventId', bodyHash: 'h2', code: 'OUT_OF_ORDER' }, now).then([]);
    const released = { type: 'EventIdReleased' as const, bodyHash: 'h1', code: 'OUT_OF_ORDER', at: '' };
    spec
      .given([claimed, released])
      .when({ type: 'Claim', claim: { type: 'EventIdClaimed', bodyHash: 'h2' } }, now)
      .then([{ type: 'EventIdClaimed', bodyHash: 'h2' }]);
  });
});

describe('write paths of the application layer', () => {
  const dir = join(__dirname, '../src/application');
  const sources = readdirSync(dir).map((f) => ({ f, text: readFileSync(join(dir, f), 'utf8') }));

  it('never appends to the event store outside the CommandHandler', () => {
    for (const { f, text } of sources) expect({ f, append: /\.append\(/.test(text) }).toEqual({ f, append: false });
  });

  it('never writes read models directly (timer documents go only by events, through the projection)', () => {
    for (const { f, text } of sources) expect({ f, write: /readStore\.write\(|op:\s*'delete'/.test(text) }).toEqual({ f, write: false });
  });
});
