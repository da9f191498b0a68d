import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { VERIFICATION_REASONS, WEBHOOK_EVENT_TYPES } from '../src';
import { SubscribableEvents } from '../../../apps/webhook-dispatcher/src/domain/catalog';

const GENERATOR = join(__dirname, '../scripts/generate-types.js');

describe('generated event types', () => {
  // In a process of its own: the generator formats with prettier, which loads its parts by dynamic import.
  it('src/events.ts is what contracts/events gives (else: npm run generate in packages/webhooks)', () => {
    const check = spawnSync(process.execPath, [GENERATOR, '--check'], { encoding: 'utf8' });
    expect({ status: check.status, stderr: check.stderr }).toEqual({ status: 0, stderr: '' });
    expect(check.stdout).toMatch(/up to date/);
  });

  it("cover exactly the service's webhook catalog (every event an endpoint can subscribe to)", () => {
    expect([...WEBHOOK_EVENT_TYPES].sort()).toEqual([...SubscribableEvents].sort());
  });

  it('the README names every event type and every rejection reason', () => {
    const readme = readFileSync(join(__dirname, '../README.md'), 'utf8');
    for (const name of [...WEBHOOK_EVENT_TYPES, ...VERIFICATION_REASONS])
      expect({ name, inReadme: readme.includes(`\`${name}\``) }).toEqual({ name, inReadme: true });
  });
});
